// Small pieces shared by the pages: status badge, progress bar, error box.

import { h } from './dom.js';
import { formatCount, progressOf } from './format.js';

export function statusBadge(status) {
  return h('span', { class: `badge status-${status}` }, status.replace('_', ' '));
}

/** A labelled progress bar: completed and failed parts of the total. */
export function progressBar(batch, { label, large = false } = {}) {
  const p = progressOf(batch);
  const share = (n) => (p.total ? `${(100 * n) / p.total}%` : '0%');
  const text = `${formatCount(p.done)} of ${formatCount(p.total)} done (${p.percent}%): ${formatCount(p.completed)} completed, ${formatCount(p.failed)} failed`;
  const completed = h('span', { class: 'bar-completed' });
  const failed = h('span', { class: 'bar-failed' });
  completed.style.width = share(p.completed);
  failed.style.width = share(p.failed);
  return h(
    'div',
    {
      class: large ? 'bar large' : 'bar',
      role: 'progressbar',
      'aria-label': label || 'Progress',
      'aria-valuemin': 0,
      'aria-valuemax': p.total,
      'aria-valuenow': p.done,
      'aria-valuetext': text,
      title: text,
    },
    completed,
    failed,
  );
}

/** An error message box, announced to screen readers; `action` (e.g. a Dismiss button) goes last. */
export function errorBox(message, action = null) {
  return h('div', { class: 'error-box', role: 'alert' }, message, action ? [' ', action] : null);
}

/** Rejections ({line, custom_id, code, message}) as a table; `sourceOf(line)` fills an extra column. */
export function rejectionTable(records, { sourceLabel, sourceOf } = {}) {
  const headers = ['Line', sourceLabel, 'custom_id', 'Code', 'Message'].filter(Boolean);
  return h(
    'div',
    { class: 'table-scroll' },
    h(
      'table',
      { class: 'rejections' },
      h('thead', {}, h('tr', {}, headers.map((name) => h('th', { scope: 'col' }, name)))),
      h(
        'tbody',
        {},
        records.map((r) =>
          h(
            'tr',
            {},
            h('td', { 'data-label': 'Line' }, String(r.line)),
            sourceLabel ? h('td', { 'data-label': sourceLabel }, sourceOf(r.line) ?? '—') : null,
            h('td', { 'data-label': 'custom_id', class: 'mono' }, r.custom_id ?? '—'),
            h('td', { 'data-label': 'Code' }, h('code', {}, r.code)),
            h('td', { 'data-label': 'Message' }, r.message),
          ),
        ),
      ),
    ),
  );
}
