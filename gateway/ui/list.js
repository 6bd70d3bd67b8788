// The batches page: newest first, filtered by status and by a metadata tag, paged with the
// API's `after` cursor; it refreshes itself while a listed batch is still running.

import { ApiError, listBatches } from './api.js';
import { h, replace } from './dom.js';
import { STATUSES, formatCount, formatTime, isTerminal, progressOf } from './format.js';
import { tagChips } from './tags.js';
import { errorBox, progressBar, statusBadge } from './widgets.js';

const PAGE_SIZES = [10, 20, 50, 100];
const DEFAULT_PAGE_SIZE = 20;
const REFRESH_MS = 3000;
// Cursors of the pages before the current one, for "Newer" (per filter set).
let trail = { filters: '', cursors: [] };

/** 'team=search' → {metadata_key: 'team', metadata_value: 'search'}; 'team' → key only. */
function tagFilter(text) {
  const tag = (text || '').trim();
  if (!tag) return {};
  const at = tag.indexOf('=');
  if (at === -1) return { metadata_key: tag };
  return { metadata_key: tag.slice(0, at).trim(), metadata_value: tag.slice(at + 1).trim() };
}

function hashFor({ status, tag, limit }, after) {
  const params = new URLSearchParams();
  if (status) params.set('status', status);
  if (tag) params.set('tag', tag);
  if (limit !== DEFAULT_PAGE_SIZE) params.set('limit', limit);
  if (after) params.set('after', after);
  const search = params.toString();
  return `#/batches${search ? `?${search}` : ''}`;
}

export function renderList(main, { params }) {
  const status = params.get('status') || '';
  const tag = params.get('tag') || '';
  const after = params.get('after') || '';
  const asked = Number(params.get('limit'));
  const limit = PAGE_SIZES.includes(asked) ? asked : DEFAULT_PAGE_SIZE;
  const view = { status, tag, limit };
  const filters = `${status}\u0000${tag}\u0000${limit}`;
  if (trail.filters !== filters) trail = { filters, cursors: [] };

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

  async function load() {
    let page;
    try {
      page = await listBatches({ limit, after, status, ...tagFilter(tag) });
    } catch (err) {
      if (stopped) return;
      results.setAttribute('aria-busy', 'false');
      if (!(err instanceof ApiError && err.status === 401)) replace(results, errorBox(err.message));
      return;
    }
    if (stopped) return;
    const focused = document.activeElement && results.contains(document.activeElement) ? document.activeElement.id : null;
    replace(results, table(page.data, status || tag), pager(page));
    results.setAttribute('aria-busy', 'false');
    if (focused) document.getElementById(focused)?.focus();
    if (page.data.some((b) => !isTerminal(b.status))) timer = setTimeout(load, REFRESH_MS);
  }

  function pager(page) {
    const newer = after
      ? h(
          'a',
          {
            class: 'button',
            id: 'page-newer',
            href: hashFor(view, trail.cursors.at(-1) || ''),
            onclick: () => trail.cursors.pop(),
          },
          '← Newer',
        )
      : null;
    const older = page.has_more
      ? h(
          'a',
          {
            class: 'button',
            id: 'page-older',
            href: hashFor(view, page.last_id),
            onclick: () => trail.cursors.push(after),
          },
          'Older →',
        )
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
