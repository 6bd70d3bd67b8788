// An editor for a batch's metadata: rows of key and value, added and removed freely.
// The API's limits (16 pairs, 64-character keys, 512-character values) are enforced by the
// inputs and by the gateway, whose error is shown as is.
//
// Keys and values are sent exactly as they stand, never trimmed: the API takes spaces around a
// key as part of it, so saving tags nobody touched changes nothing. A row the user never edited
// answers the pair the API gave, as given: a text field drops line breaks from its value.

import { h } from './dom.js';

const MAX_PAIRS = 16;
const MAX_KEY = 64;
const MAX_VALUE = 512;

let editors = 0;

/** Metadata pairs sorted by key: the API's maps keep no order, so the page keeps its own. */
function sortedPairs(metadata) {
  return Object.entries(metadata || {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** A metadata editor filled with `metadata`; `.read()` answers {metadata, error}. */
export function tagEditor(metadata, { legend = 'Tags (metadata)', legendHidden = false } = {}) {
  const id = `tags-${++editors}`;
  const rows = h('div', { class: 'tag-rows' });
  const addButton = h('button', { class: 'button quiet', type: 'button' }, 'Add tag');
  const fieldset = h(
    'fieldset',
    { class: 'tags', id },
    h('legend', { class: legendHidden ? 'visually-hidden' : null }, legend),
    rows,
    addButton,
  );

  // Rows filled from `metadata` → their pair as the API gave it, until the user edits the row.
  const untouched = new WeakMap();

  function addRow(key = '', value = '') {
    const n = rows.children.length + 1;
    const keyInput = h('input', { class: 'tag-key', maxlength: MAX_KEY, value: key, 'aria-label': `Tag ${n} key` });
    const valueInput = h('input', {
      class: 'tag-value',
      maxlength: MAX_VALUE,
      value,
      'aria-label': `Tag ${n} value`,
    });
    const row = h(
      'div',
      { class: 'tag-row' },
      keyInput,
      h('span', { 'aria-hidden': 'true' }, '='),
      valueInput,
      h(
        'button',
        {
          class: 'button quiet',
          type: 'button',
          'aria-label': `Remove tag ${n}`,
          onclick: () => {
            row.remove();
            renumber();
            addButton.disabled = false;
            addButton.focus();
          },
        },
        'Remove',
      ),
    );
    rows.append(row);
    addButton.disabled = rows.children.length >= MAX_PAIRS;
    return keyInput;
  }

  function renumber() {
    [...rows.children].forEach((row, i) => {
      row.querySelector('.tag-key').setAttribute('aria-label', `Tag ${i + 1} key`);
      row.querySelector('.tag-value').setAttribute('aria-label', `Tag ${i + 1} value`);
      row.querySelector('button').setAttribute('aria-label', `Remove tag ${i + 1}`);
    });
  }

  addButton.addEventListener('click', () => addRow().focus());
  for (const [key, value] of sortedPairs(metadata)) {
    addRow(key, value);
    const row = rows.lastElementChild;
    untouched.set(row, [key, value]);
    row.addEventListener('input', () => untouched.delete(row), { once: true });
  }

  return {
    element: fieldset,
    read() {
      // No prototype: keys such as `constructor` or `__proto__` are keys like any other.
      const result = Object.create(null);
      for (const row of rows.children) {
        const given = untouched.get(row);
        const [key, value] = given || [row.querySelector('.tag-key').value, row.querySelector('.tag-value').value];
        if (!given && !key && !value) continue; // a row left empty
        if (!given && !key) return { error: 'Every tag needs a key.' };
        if (Object.hasOwn(result, key)) return { error: `The key "${key}" is used twice.` };
        result[key] = value;
      }
      return { metadata: result };
    },
  };
}

/** Tags as compact chips (read-only). */
export function tagChips(metadata) {
  const entries = sortedPairs(metadata);
  if (!entries.length) return null;
  return h(
    'ul',
    { class: 'chips', 'aria-label': 'Tags' },
    entries.map(([key, value]) => h('li', { class: 'chip' }, value === '' ? key : `${key}=${value}`)),
  );
}
