// The public REST API (`/v1/...`), called with the key the user pasted. The key lives in
// sessionStorage only: never in a URL, a cookie or localStorage, and it is gone when the tab
// closes.

const KEY_STORAGE = 'batchgate.apiKey';
// The API sits next to the panel: /ui/ → /v1/ (also behind a proxy that adds a path prefix).
const API_BASE = new URL('../v1/', document.baseURI);

export const UNAUTHORIZED_EVENT = 'batchgate:unauthorized';

export function getKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function setKey(key) {
  sessionStorage.setItem(KEY_STORAGE, key);
}

export function clearKey() {
  sessionStorage.removeItem(KEY_STORAGE);
}

/**
 * Why `key` cannot be an API key, or null. Keys are printable ASCII (`bg-` and url-safe
 * characters), so anything else came with the copy: the `…` that ends a prefix in
 * `batchgate keys list`, a zero-width space. Checked before sending: a header cannot carry most
 * of them, and the browser's refusal would read like a network failure.
 */
export function keyProblem(key) {
  const odd = [...(key || '')].find((c) => c < '!' || c > '~');
  if (odd === undefined) return null;
  const code = `U+${odd.codePointAt(0).toString(16).toUpperCase().padStart(4, '0')}`;
  const shown = /[\p{L}\p{N}\p{P}\p{S}]/u.test(odd) ? `“${odd}” (${code})` : code;
  return (
    `This key contains ${shown}, a character no API key has. Paste the whole key as ` +
    '`batchgate keys create` printed it (`keys list` shows only its start).'
  );
}

/** An answer in OpenAI's error envelope (or a network failure: status 0, code `unreachable`). */
export class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || null;
    this.param = error.param || null;
    this.error = error;
  }
}

async function errorOf(response) {
  try {
    const body = await response.json();
    if (body && typeof body.error === 'object' && body.error) return body.error;
  } catch {
    // not JSON: fall through
  }
  return { message: `The gateway answered HTTP ${response.status}.` };
}

/**
 * Calls `path` (relative to /v1/, e.g. `batches?limit=20`). `json` is sent as a JSON body,
 * `form` as multipart. Answers the parsed JSON, or the Response itself with `raw: true`.
 * Throws ApiError; a 401 also fires UNAUTHORIZED_EVENT on window.
 */
async function api(path, { method = 'GET', json, form, raw = false } = {}) {
  const headers = { Authorization: `Bearer ${getKey() || ''}` };
  let body;
  if (json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(json);
  } else if (form !== undefined) {
    body = form;
  }
  let response;
  try {
    response = await fetch(new URL(path, API_BASE), { method, headers, body });
  } catch {
    // fetch also throws, sending nothing, when the key cannot be a header value.
    const problem = keyProblem(getKey());
    if (problem) throw new ApiError(0, { code: 'invalid_key_characters', message: problem });
    throw new ApiError(0, { code: 'unreachable', message: 'The gateway could not be reached.' });
  }
  if (!response.ok) {
    const error = new ApiError(response.status, await errorOf(response));
    if (response.status === 401) window.dispatchEvent(new CustomEvent(UNAUTHORIZED_EVENT));
    throw error;
  }
  return raw ? response : response.json();
}

/** Whether asking again later may succeed: the gateway was down, busy or failing. */
export function isTransient(err) {
  if (!(err instanceof ApiError)) return true; // e.g. a proxy's page instead of JSON
  return err.code === 'unreachable' || err.status === 408 || err.status === 429 || err.status >= 500;
}

/** `?name=value&…`, every name and value percent-encoded (a space as `%20`, a plus as `%2B`). */
export function query(params) {
  const pairs = Object.entries(params)
    .filter(([, value]) => value !== undefined && value !== null && value !== '')
    .map(([name, value]) => `${encodeURIComponent(name)}=${encodeURIComponent(value)}`);
  return pairs.length ? `?${pairs.join('&')}` : '';
}

export const listBatches = (params) => api(`batches${query(params)}`);
export const getBatch = (id) => api(`batches/${encodeURIComponent(id)}`);
export const cancelBatch = (id) => api(`batches/${encodeURIComponent(id)}/cancel`, { method: 'POST', json: {} });
export const updateMetadata = (id, metadata) =>
  api(`batches/${encodeURIComponent(id)}/metadata`, { method: 'POST', json: { metadata } });
export const createBatch = (request) => api('batches', { method: 'POST', json: request });
export const listModels = () => api('models');
export const deleteFile = (id) => api(`files/${encodeURIComponent(id)}`, { method: 'DELETE' });
const fileContent = (id) => api(`files/${encodeURIComponent(id)}/content`, { raw: true });

/** Uploads `blob` as a `purpose=batch` file named `filename`; answers the File object. */
export function uploadFile(blob, filename) {
  const form = new FormData();
  form.append('purpose', 'batch'); // before the file: the gateway checks it before storing bytes
  form.append('file', blob, filename);
  return api('files', { method: 'POST', form });
}

/** Saves file `id` to the user's disk as `filename` (the download needs the key, so no plain link). */
export async function downloadFile(id, filename) {
  const blob = await (await fileContent(id)).blob();
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** The first `max` JSON lines of file `id`, reading no further than needed. */
export async function firstJsonLines(id, max) {
  const reader = (await fileContent(id)).body.pipeThrough(new TextDecoderStream()).getReader();
  const lines = [];
  let pending = '';
  while (lines.length < max) {
    const { value, done } = await reader.read();
    if (done) {
      lines.push(pending);
      break;
    }
    const parts = (pending + value).split('\n');
    pending = parts.pop();
    lines.push(...parts);
  }
  await reader.cancel();
  return lines
    .filter((line) => line.trim())
    .slice(0, max)
    .map((line) => JSON.parse(line));
}
