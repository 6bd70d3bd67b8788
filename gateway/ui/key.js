// Asks for the API key. It is checked (its characters here, then against the gateway), then kept
// in sessionStorage only.

import { ApiError, keyProblem, listModels, setKey, clearKey } from './api.js';
import { h } from './dom.js';

export function renderKeyForm(main, { message, onKey }) {
  const input = h('input', {
    id: 'api-key',
    name: 'api-key',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'api-key-help',
  });
  const status = h('p', { class: 'form-error', role: 'alert' }, message || '');
  const form = h(
    'form',
    { class: 'card narrow', method: 'post', 'aria-labelledby': 'key-title' },
    h('h1', { id: 'key-title' }, 'Sign in with an API key'),
    h('label', { for: 'api-key' }, 'API key'),
    input,
    h(
      'p',
      { id: 'api-key-help', class: 'hint' },
      'A batchgate key (bg-…) from `batchgate keys create`. It stays in this browser tab ' +
        '(sessionStorage) and is sent only to this gateway; closing the tab forgets it.',
    ),
    status,
    h('button', { class: 'button primary', type: 'submit' }, 'Continue'),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    // Said here, sending nothing: no key has such a character, so the gateway would only refuse it.
    const problem = keyProblem(key);
    if (problem) {
      status.textContent = problem;
      input.focus();
      return;
    }
    setKey(key);
    status.textContent = 'Checking the key…';
    try {
      await listModels();
      onKey();
    } catch (err) {
      if (err instanceof ApiError && err.status === 401) return; // the app asks again, saying why
      clearKey();
      status.textContent = err.message;
      input.focus();
    }
  });
  main.append(form);
  input.focus();
}
