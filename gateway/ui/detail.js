// One batch: live progress (rate and ETA), timestamps, usage and cost, downloads, rejected
// records, cancel, and its tags. It polls the batch every second until it ends.

import { ApiError, cancelBatch, downloadFile, firstJsonLines, getBatch, updateMetadata } from './api.js';
import { h, replace } from './dom.js';
import {
  RateMeter,
  formatCount,
  formatDuration,
  formatTime,
  formatUsd,
  isTerminal,
  progressOf,
} from './format.js';
import { tagEditor } from './tags.js';
import { errorBox, progressBar, rejectionTable, statusBadge } from './widgets.js';

const POLL_MS = 1000;
const REJECTIONS_SHOWN = 100;
const TIMESTAMPS = [
  ['created_at', 'Created'],
  ['in_progress_at', 'In progress'],
  ['cancelling_at', 'Cancelling'],
  ['finalizing_at', 'Finalizing'],
  ['completed_at', 'Completed'],
  ['failed_at', 'Failed'],
  ['expired_at', 'Expired'],
  ['cancelled_at', 'Cancelled'],
  ['expires_at', 'Window ends'],
];

/** A link to another batch's page (retry links). */
function batchLink(id) {
  return h('a', { href: `#/batches/${encodeURIComponent(id)}`, class: 'mono' }, id, ' ');
}

export function renderDetail(main, batchId) {
  const heading = h('h1', { class: 'mono break' }, batchId);
  const statusLine = h('p', { class: 'status-line', role: 'status' });
  const actions = h('div', { class: 'actions' });
  const progress = h('section', { 'aria-labelledby': 'progress-title', class: 'card' });
  const facts = h('section', { 'aria-labelledby': 'facts-title', class: 'card' });
  const timeline = h('section', { 'aria-labelledby': 'timeline-title', class: 'card' });
  const usage = h('section', { 'aria-labelledby': 'usage-title', class: 'card' });
  const files = h('section', { 'aria-labelledby': 'files-title', class: 'card' });
  const rejections = h('section', { 'aria-labelledby': 'rejections-title', class: 'card', hidden: true });
  const tags = h('section', { 'aria-labelledby': 'tags-title', class: 'card' });
  // Two error areas: the poll's error goes once a poll succeeds, but a failed cancel or download
  // stays until the user acts again or dismisses it (the poll runs every second).
  const problem = h('div');
  const actionProblem = h('div');
  main.append(
    h('p', { class: 'crumbs' }, h('a', { href: '#/batches' }, '← All batches')),
    h('div', { class: 'page-head' }, h('div', {}, heading, statusLine), actions),
    problem,
    actionProblem,
    h('div', { class: 'grid' }, progress, usage, facts, timeline, files),
    rejections,
    tags,
  );

  const meter = new RateMeter();
  let batch = null;
  let timer = null;
  let stopped = false;

  function show(next) {
    const first = !batch;
    const statusChanged = first || batch.status !== next.status;
    batch = next;
    meter.observe(Date.now() / 1000, progressOf(batch).done);
    if (statusChanged) replace(statusLine, 'Status: ', statusBadge(batch.status));
    renderActions();
    renderProgress();
    renderFacts();
    renderTimeline();
    renderUsage();
    renderFiles();
    // Once, on the first answer, even when earlier polls failed: the editor keeps what the user
    // types, and the rejected records never change.
    if (first) {
      renderTags();
      renderRejections();
    }
  }

  /** Shows a failed action's error until the next action, or the user's Dismiss. */
  function actionFailed(message) {
    const dismiss = h('button', { class: 'button quiet', type: 'button' }, 'Dismiss');
    dismiss.addEventListener('click', () => {
      replace(actionProblem);
      main.focus(); // the button is gone: keep the focus on the page
    });
    replace(actionProblem, errorBox(message, dismiss));
  }

  async function poll() {
    try {
      const next = await getBatch(batchId);
      if (stopped) return;
      show(next);
      replace(problem);
    } catch (err) {
      if (stopped || (err instanceof ApiError && err.status === 401)) return;
      replace(problem, errorBox(err.message));
      if (err instanceof ApiError && err.status === 404) return;
    }
    if (stopped) return;
    if (!batch || !isTerminal(batch.status)) timer = setTimeout(poll, POLL_MS);
  }

  function renderActions() {
    if (batch.status !== 'in_progress') {
      replace(actions);
      return;
    }
    if (actions.querySelector('#cancel-batch')) return;
    const button = h('button', { id: 'cancel-batch', class: 'button danger', type: 'button' }, 'Cancel batch');
    button.addEventListener('click', async () => {
      const question = `Cancel ${batch.id}? Queued requests are cancelled; requests already running finish and are kept.`;
      if (!window.confirm(question)) return;
      button.disabled = true;
      replace(actionProblem);
      try {
        show(await cancelBatch(batch.id));
      } catch (err) {
        button.disabled = false;
        actionFailed(err.message);
      }
    });
    replace(actions, button);
  }

  function renderProgress() {
    const p = progressOf(batch);
    const running = !isTerminal(batch.status);
    // The server's pace over the last minute (`throughput`) when it gives one; else what this
    // page measured between its polls.
    const pace = batch.throughput;
    const rate = pace ? pace.items_per_s : meter.rate();
    const eta = pace ? pace.eta_s : meter.eta(p.total - p.done);
    replace(
      progress,
      h('h2', { id: 'progress-title' }, 'Progress'),
      progressBar(batch, { label: 'Batch progress', large: true }),
      h(
        'p',
        { class: 'counts' },
        h('strong', {}, `${formatCount(p.done)} of ${formatCount(p.total)}`),
        ` done (${p.percent}%)`,
      ),
      h(
        'ul',
        { class: 'legend' },
        h('li', {}, h('span', { class: 'swatch bar-completed', 'aria-hidden': 'true' }), `${formatCount(p.completed)} completed`),
        h('li', {}, h('span', { class: 'swatch bar-failed', 'aria-hidden': 'true' }), `${formatCount(p.failed)} failed`),
        batch.rejected_count ? h('li', {}, `${formatCount(batch.rejected_count)} of them rejected at create`) : null,
      ),
      running
        ? h(
            'dl',
            { class: 'inline' },
            h('dt', {}, 'Rate'),
            h('dd', { id: 'rate' }, rate ? `${rate.toFixed(1)}/s` : '—'),
            h('dt', {}, 'Time left'),
            h('dd', { id: 'eta' }, eta !== null ? formatDuration(eta) : '—'),
            pace ? [h('dt', {}, 'Tokens'), h('dd', { id: 'tokens-rate' }, `${Math.round(pace.tokens_per_s)}/s`)] : null,
          )
        : null,
    );
  }

  function renderFacts() {
    replace(
      facts,
      h('h2', { id: 'facts-title' }, 'Details'),
      h(
        'dl',
        {},
        batch.name ? [h('dt', {}, 'Name'), h('dd', { id: 'batch-name' }, batch.name)] : null,
        h('dt', {}, 'Endpoint'),
        h('dd', { class: 'mono' }, batch.endpoint),
        h('dt', {}, 'Model'),
        h('dd', {}, batch.model || '—'),
        h('dt', {}, 'Priority'),
        h('dd', {}, String(batch.priority)),
        h('dt', {}, 'Window'),
        h('dd', {}, batch.completion_window),
        batch.retry_of ? [h('dt', {}, 'Retry of'), h('dd', {}, batchLink(batch.retry_of))] : null,
        batch.retries?.length ? [h('dt', {}, 'Retried as'), h('dd', {}, batch.retries.map(batchLink))] : null,
      ),
      batch.errors?.data?.length
        ? h('ul', { class: 'errors' }, batch.errors.data.map((e) => h('li', {}, h('code', {}, e.code), ' ', e.message)))
        : null,
    );
  }

  function renderTimeline() {
    const stamps = TIMESTAMPS.filter(([field]) => batch[field] !== null && batch[field] !== undefined);
    replace(
      timeline,
      h('h2', { id: 'timeline-title' }, 'Timeline'),
      h('dl', {}, stamps.map(([field, label]) => [h('dt', {}, label), h('dd', {}, formatTime(batch[field]))])),
    );
  }

  function renderUsage() {
    const u = batch.usage || {};
    const cost = batch.cost || {};
    replace(
      usage,
      h('h2', { id: 'usage-title' }, 'Usage and cost'),
      h(
        'dl',
        {},
        h('dt', {}, 'Input tokens'),
        h('dd', {}, `${formatCount(u.input_tokens)} (${formatCount(u.input_tokens_details?.cached_tokens)} cached)`),
        h('dt', {}, 'Output tokens'),
        h(
          'dd',
          {},
          `${formatCount(u.output_tokens)} (${formatCount(u.output_tokens_details?.reasoning_tokens)} reasoning)`,
        ),
        h('dt', {}, 'Total tokens'),
        h('dd', {}, formatCount(u.total_tokens)),
        h('dt', {}, 'Cost'),
        h(
          'dd',
          { id: 'cost' },
          formatUsd(cost.amount),
          cost.discount ? ` (after a ${Math.round(cost.discount * 100)}% batch discount)` : '',
        ),
      ),
    );
  }

  function renderFiles() {
    const file = (id, label, suffix) =>
      id
        ? h(
            'li',
            {},
            h(
              'button',
              {
                class: 'button',
                type: 'button',
                'data-file': suffix,
                onclick: (event) => download(event.currentTarget, id, `${batch.id}_${suffix}.jsonl`),
              },
              label,
            ),
          )
        : null;
    const list = [
      file(batch.output_file_id, 'Download output', 'output'),
      file(batch.error_file_id, 'Download errors', 'errors'),
      file(batch.rejected_records_file_id, 'Download rejections', 'rejections'),
      file(batch.input_file_id, 'Download input', 'input'),
    ].filter(Boolean);
    const pending = isTerminal(batch.status) ? null : h('p', { class: 'hint' }, 'Output and error files appear when the batch ends.');
    replace(files, h('h2', { id: 'files-title' }, 'Files'), pending, h('ul', { class: 'buttons' }, list));
  }

  async function download(button, id, filename) {
    button.disabled = true;
    replace(actionProblem);
    try {
      await downloadFile(id, filename);
    } catch (err) {
      actionFailed(`Download failed: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  }

  async function renderRejections() {
    if (!batch.rejected_count || !batch.rejected_records_file_id) return;
    rejections.hidden = false;
    replace(rejections, h('h2', { id: 'rejections-title' }, 'Rejected records'), h('p', {}, 'Loading…'));
    let records;
    try {
      records = await firstJsonLines(batch.rejected_records_file_id, REJECTIONS_SHOWN);
    } catch (err) {
      replace(rejections, h('h2', { id: 'rejections-title' }, 'Rejected records'), errorBox(err.message));
      return;
    }
    replace(
      rejections,
      h('h2', { id: 'rejections-title' }, 'Rejected records'),
      h(
        'p',
        {},
        `${formatCount(batch.rejected_count)} record(s) were refused when the batch was created and never ran`,
        batch.rejected_count > records.length ? `; the first ${records.length} are listed.` : '.',
      ),
      rejectionTable(records),
    );
  }

  function renderTags() {
    const editor = tagEditor(batch.metadata, { legend: 'Tags of this batch', legendHidden: true });
    const message = h('p', { class: 'form-status', role: 'status' });
    const form = h(
      'form',
      { class: 'tags-form' },
      editor.element,
      h('div', { class: 'form-actions' }, h('button', { class: 'button primary', type: 'submit' }, 'Save tags'), message),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const { metadata, error } = editor.read();
      if (error) {
        message.textContent = error;
        return;
      }
      message.textContent = 'Saving…';
      try {
        show(await updateMetadata(batch.id, metadata));
        renderTags();
        tags.querySelector('.form-status').textContent = 'Tags saved.';
      } catch (err) {
        message.textContent = err.message;
      }
    });
    replace(
      tags,
      h('h2', { id: 'tags-title' }, 'Tags'),
      h('p', { class: 'hint' }, 'Metadata pairs; saving replaces them all. Filter the batch list by them.'),
      form,
    );
  }

  poll();

  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
