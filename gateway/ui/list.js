// The batches page: newest first, filtered by status and by a metadata tag, paged with the
// API's `after` cursor; it refreshes itself while a listed batch is still running, and tries
// again by itself while the gateway cannot answer.

import { ApiError, isTransient, listBatches } from './api.js';
import { h, replace } from './dom.js';
import { STATUSES, formatCount, formatTime, isTerminal, progressOf } from './format.js';
import { tagChips } from './tags.js';
import { errorBox, progressBar, statusBadge } from './widgets.js';

const PAGE_SIZES = [10, 20, 50, 100];
const DEFAULT_PAGE_SIZE = 20;
const REFRESH_MS = 3000;
// After failed loads the list waits longer each time (3 s, 6 s, 12 s), up to this.
const RETRY_MAX_MS = 15_000;

/** 'team=search' → {metadata_key: 'team', metadata_value: 'search'}; 'team' → key only. */
function tagFilter(text) {
  const tag = (text || '').trim();
  if (!tag) return {};
  const at = tag.indexOf('=');
  if (at === -1) return { metadata_key: tag };
  return { metadata_key: tag.slice(0, at).trim(), metadata_value: tag.slice(at + 1).trim() };
}

/**
 * The route of one page. The API pages only towards older batches, so the route also carries
 * `trail`: the cursors of the pages between the first and this one, the previous page's last.
 * "Newer" then works from the route alone: after Back or Forward, a reload, or a copied link.
 */
function hashFor({ status, tag, limit }, after, trail = []) {
  const params = new URLSearchParams();
  if (status) params.set('status', status);
  if (tag) params.set('tag', tag);
  if (limit !== DEFAULT_PAGE_SIZE) params.set('limit', limit);
  if (after) params.set('after', after);
  for (const cursor of after ? trail : []) params.append('trail', cursor);
  const search = params.toString();
  return `#/batches${search ? `?${search}` : ''}`;
}

export function renderList(main, { params }) {
  const status = params.get('status') || '';
  const tag = params.get('tag') || '';
  const after = params.get('after') || '';
  const trail = after ? params.getAll('trail').filter(Boolean) : [];
  const asked = Number(params.get('limit'));
  const limit = PAGE_SIZES.includes(asked) ? asked : DEFAULT_PAGE_SIZE;
  const view = { status, tag, limit };

  const statusSelect = h(
    'select',
    { id: 'filter-status', name: 'status' },
    h('option', { value: '' }, 'Any status'),
    STATUSES.map((s) => h('option', { value: s, selected: s === status }, s.replace('_', ' '))),
  );
  const tagInput = h('input', {
    id: 'filter-tag',
    name: 'tag',
    value: tag,
    placeholder: 'team=search',
    'aria-describedby': 'filter-tag-help',
  });
  const limitSelect = h(
    'select',
    { id: 'filter-limit', name: 'limit' },
    PAGE_SIZES.map((n) => h('option', { value: n, selected: n === limit }, String(n))),
  );
  const filterForm = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Filter batches' },
    h('div', { class: 'field' }, h('label', { for: 'filter-status' }, 'Status'), statusSelect),
    h(
      'div',
      { class: 'field' },
      h('label', { for: 'filter-tag' }, 'Tag'),
      tagInput,
      h('span', { id: 'filter-tag-help', class: 'hint' }, 'key=value, or a key alone'),
    ),
    h('div', { class: 'field' }, h('label', { for: 'filter-limit' }, 'Per page'), limitSelect),
    h('button', { class: 'button', type: 'submit' }, 'Apply'),
    status || tag ? h('a', { class: 'button quiet', href: '#/batches' }, 'Clear') : null,
  );
  filterForm.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = { status: statusSelect.value, tag: tagInput.value.trim(), limit: Number(limitSelect.value) };
    location.hash = hashFor(next, '');
  });

  const results = h('div', { class: 'results', 'aria-live': 'polite', 'aria-busy': 'true' }, h('p', {}, 'Loading…'));
  main.append(
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'Batches'),
      h('a', { class: 'button primary', href: '#/upload' }, 'New batch'),
    ),
    filterForm,
    results,
  );

  let timer = null;
  let stopped = false;
  let failures = 0;

  async function load() {
    let page;
    try {
      page = await listBatches({ limit, after, status, ...tagFilter(tag) });
    } catch (err) {
      if (!stopped) failed(err);
      return;
    }
    if (stopped) return;
    failures = 0;
    const focused = document.activeElement && results.contains(document.activeElement) ? document.activeElement.id : null;
    replace(results, table(page.data, status || tag), pager(page));
    results.setAttribute('aria-busy', 'false');
    if (focused) document.getElementById(focused)?.focus();
    if (page.data.some((b) => !isTerminal(b.status))) timer = setTimeout(load, REFRESH_MS);
  }

  /** Shows why the list could not load; an outage is tried again until the gateway answers. */
  function failed(err) {
    results.setAttribute('aria-busy', 'false');
    if (err instanceof ApiError && err.status === 401) return; // the app asks for a key again
    if (!isTransient(err)) {
      replace(results, errorBox(err.message));
      return;
    }
    failures += 1;
    replace(results, errorBox(`${err.message} Trying again…`));
    timer = setTimeout(load, Math.min(REFRESH_MS * 2 ** (failures - 1), RETRY_MAX_MS));
  }

  function pager(page) {
    const olderTrail = after ? [...trail, after] : []; // the first page's cursor is none
    const newer = after
      ? h('a', { class: 'button', id: 'page-newer', href: hashFor(view, trail.at(-1), trail.slice(0, -1)) }, '← Newer')
      : null;
    const older = page.has_more
      ? h('a', { class: 'button', id: 'page-older', href: hashFor(view, page.last_id, olderTrail) }, 'Older →')
      : null;
    if (!newer && !older) return null;
    return h('nav', { class: 'pager', 'aria-label': 'Pages' }, newer, older);
  }

  load();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

function table(batches, filtered) {
  if (!batches.length) {
    return h(
      'p',
      { class: 'empty' },
      filtered ? 'No batch matches these filters.' : 'No batches yet. ',
      filtered ? null : h('a', { href: '#/upload' }, 'Create one.'),
    );
  }
  return h(
    'table',
    { class: 'batches' },
    h('caption', { class: 'visually-hidden' }, 'Batches, newest first'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['Batch', 'Status', 'Progress', 'Model', 'Tags'].map((name) => h('th', { scope: 'col' }, name)),
      ),
    ),
    h('tbody', {}, batches.map(row)),
  );
}

function row(batch) {
  const p = progressOf(batch);
  // One wrapper per cell: on a phone the cell is a two-column grid (label, content).
  const cell = (label, ...content) => h('td', { 'data-label': label }, h('div', {}, content));
  return h(
    'tr',
    {},
    cell(
      'Batch',
      h('a', { href: `#/batches/${encodeURIComponent(batch.id)}`, id: `link-${batch.id}`, class: 'mono' }, batch.id),
      batch.name ? h('div', { class: 'batch-name' }, batch.name) : null,
      h('div', { class: 'hint' }, formatTime(batch.created_at)),
    ),
    cell('Status', statusBadge(batch.status)),
    cell(
      'Progress',
      progressBar(batch, { label: `Progress of ${batch.id}` }),
      h('div', { class: 'hint' }, `${formatCount(p.done)} / ${formatCount(p.total)}`),
    ),
    cell('Model', batch.model || '—'),
    cell('Tags', tagChips(batch.metadata) || '—'),
  );
}
