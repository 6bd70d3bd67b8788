// The panel's entry: a hash router (#/batches, #/batches/<id>, #/upload) and the API key gate.
// The key never appears in a URL: routes carry only ids and filters.

import { UNAUTHORIZED_EVENT, clearKey, getKey } from './api.js';
import { renderDetail } from './detail.js';
import { renderKeyForm } from './key.js';
import { renderList } from './list.js';
import { renderUpload } from './upload.js';

const main = document.getElementById('main');
const forgetButton = document.getElementById('forget-key');
let stopView = () => {};

/** '#/batches/abc?x=1' → {parts: ['batches', 'abc'], params: URLSearchParams}. */
function parseHash() {
  const [path, search = ''] = location.hash.replace(/^#\/?/, '').split('?');
  return { parts: path.split('/').filter(Boolean).map(decodePart), params: new URLSearchParams(search) };
}

function decodePart(part) {
  try {
    return decodeURIComponent(part);
  } catch {
    return part; // a stray '%': show what was typed (the API answers 404 for it)
  }
}

function viewFor({ parts }) {
  if (parts[0] === 'batches' && parts[1]) return { nav: 'batches', render: (el) => renderDetail(el, parts[1]) };
  if (parts[0] === 'upload') return { nav: 'upload', render: renderUpload };
  return { nav: 'batches', render: renderList };
}

function show(message = null) {
  stopView();
  stopView = () => {};
  main.replaceChildren();
  const hasKey = Boolean(getKey());
  forgetButton.hidden = !hasKey;
  const route = parseHash();
  const view = viewFor(route);
  for (const link of document.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === view.nav && hasKey) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  if (!hasKey) {
    renderKeyForm(main, { message, onKey: () => show() });
    return;
  }
  stopView = view.render(main, route) || (() => {});
}

window.addEventListener('hashchange', () => {
  if (!location.hash.startsWith('#/') && location.hash !== '') return; // in-page anchors (skip link)
  show();
  main.focus({ preventScroll: true });
});

window.addEventListener(UNAUTHORIZED_EVENT, () => {
  clearKey();
  show('The gateway refused this API key. Paste a valid one.');
});

forgetButton.addEventListener('click', () => {
  clearKey();
  show('The key was removed from this tab.');
});

document.querySelector('.skip-link').addEventListener('click', (event) => {
  event.preventDefault();
  main.focus();
});

show();
