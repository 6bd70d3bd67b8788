// The new-batch page: pick or drop a `.jsonl` (sent as is) or a `.csv` with one prompt per row
// (turned into records for the chosen model, previewed first), set the batch's options,
// upload, create, and show what the gateway rejected.

import { ApiError, createBatch, deleteFile, listModels, uploadFile } from './api.js';
import { ENDPOINTS, SYSTEM_PROMPT_ENDPOINTS, csvToRecords, toJsonl } from './csv.js';
import { h, replace } from './dom.js';
import { formatBytes, formatCount } from './format.js';
import { tagEditor } from './tags.js';
import { errorBox, rejectionTable } from './widgets.js';

const PREVIEW_RECORDS = 5;
const JSONL_PREVIEW_BYTES = 64 * 1024;

const isCsv = (file) => /\.csv$/i.test(file.name) || file.type === 'text/csv';

export function renderUpload(main) {
  let file = null; // the chosen File
  let csvText = null; // its text, when it is a CSV
  let conversion = null; // csvToRecords' answer for the current options
  let models = [];

  // --- the file ---------------------------------------------------------------------------
  const fileInput = h('input', {
    id: 'file-input',
    type: 'file',
    accept: '.jsonl,.csv,.json,.txt,text/csv',
    'aria-describedby': 'file-help',
  });
  const fileInfo = h('p', { id: 'file-info', class: 'file-info', 'aria-live': 'polite' });
  const dropZone = h(
    'div',
    { class: 'drop-zone', id: 'drop-zone' },
    h('label', { for: 'file-input' }, 'Input file'),
    fileInput,
    h(
      'p',
      { id: 'file-help', class: 'hint' },
      'Choose a file or drop it here. A .jsonl file is sent as it is (one request per line); ',
      'a .csv file holds one prompt per row (RFC 4180; a header row may name the "prompt" and "custom_id" columns).',
    ),
    fileInfo,
  );
  for (const name of ['dragenter', 'dragover']) {
    dropZone.addEventListener(name, (event) => {
      event.preventDefault();
      dropZone.classList.add('dragging');
    });
  }
  for (const name of ['dragleave', 'drop']) {
    dropZone.addEventListener(name, () => dropZone.classList.remove('dragging'));
  }
  dropZone.addEventListener('drop', (event) => {
    event.preventDefault();
    if (event.dataTransfer.files.length) choose(event.dataTransfer.files[0]);
  });
  fileInput.addEventListener('change', () => fileInput.files.length && choose(fileInput.files[0]));

  // --- request settings ---------------------------------------------------------------------
  const endpointSelect = h(
    'select',
    { id: 'endpoint', name: 'endpoint' },
    ENDPOINTS.map((e) => h('option', { value: e }, e)),
  );
  const modelSelect = h('select', { id: 'model', name: 'model', 'aria-describedby': 'model-help' });
  const modelHelp = h('span', { id: 'model-help', class: 'hint' });
  const systemPrompt = h('textarea', { id: 'system-prompt', name: 'system-prompt', rows: 3 });
  const systemField = h(
    'div',
    { class: 'field' },
    h('label', { for: 'system-prompt' }, 'System prompt (optional)'),
    systemPrompt,
  );
  const headerBox = h('input', { id: 'csv-header', type: 'checkbox' });
  const csvOptions = h(
    'fieldset',
    { id: 'csv-options', hidden: true },
    h('legend', {}, 'From CSV rows to requests'),
    h('div', { class: 'field' }, h('label', { for: 'model' }, 'Model'), modelSelect, modelHelp),
    systemField,
    h('div', { class: 'check' }, headerBox, h('label', { for: 'csv-header' }, 'The first row is a header')),
  );
  const preview = h('section', { id: 'preview', class: 'preview', 'aria-live': 'polite', hidden: true });

  // --- batch options -------------------------------------------------------------------------
  const windowInput = h('input', { id: 'completion-window', value: '24h', list: 'windows', required: true });
  const prioritySelect = h(
    'select',
    { id: 'priority', name: 'priority' },
    h('option', { value: 'standard' }, 'Standard'),
    h('option', { value: 'expedited' }, 'Expedited (runs before standard batches)'),
    h('option', { value: 'number' }, 'A number (higher runs first)'),
  );
  const priorityNumber = h('input', { id: 'priority-number', type: 'number', step: 1, value: 0 });
  const priorityNumberField = h(
    'div',
    { class: 'field', hidden: true },
    h('label', { for: 'priority-number' }, 'Priority number'),
    priorityNumber,
  );
  prioritySelect.addEventListener('change', () => {
    priorityNumberField.hidden = prioritySelect.value !== 'number';
  });
  const tags = tagEditor({});

  const submit = h('button', { id: 'create-batch', class: 'button primary', type: 'submit', disabled: true }, 'Create batch');
  const progressText = h('p', { class: 'form-status', role: 'status' });
  const result = h('section', { id: 'result', 'aria-live': 'polite' });

  const form = h(
    'form',
    { class: 'upload', 'aria-labelledby': 'upload-title' },
    dropZone,
    h('div', { class: 'field' }, h('label', { for: 'endpoint' }, 'Endpoint'), endpointSelect),
    csvOptions,
    preview,
    h(
      'fieldset',
      {},
      h('legend', {}, 'Batch options'),
      h(
        'div',
        { class: 'field' },
        h('label', { for: 'completion-window' }, 'Completion window'),
        windowInput,
        h('datalist', { id: 'windows' }, h('option', { value: '24h' })),
      ),
      h('div', { class: 'field' }, h('label', { for: 'priority' }, 'Priority'), prioritySelect),
      priorityNumberField,
      tags.element,
    ),
    submit,
    progressText,
  );
  main.append(h('h1', { id: 'upload-title' }, 'New batch'), form, result);

  // --- behaviour -----------------------------------------------------------------------------
  async function choose(chosen) {
    file = chosen;
    csvText = null;
    conversion = null;
    replace(result);
    replace(fileInfo, h('strong', {}, file.name), ` (${formatBytes(file.size)})`);
    csvOptions.hidden = !isCsv(file);
    if (isCsv(file)) {
      csvText = await file.text();
      headerBox.checked = csvToRecords(csvText, { ...options(), header: 'auto' }).header;
    } else {
      await guessEndpoint();
    }
    refresh();
  }

  function options() {
    return {
      endpoint: endpointSelect.value,
      model: modelSelect.value,
      systemPrompt: systemPrompt.value,
      header: csvText === null ? 'auto' : headerBox.checked,
    };
  }

  /** A JSONL file's records name their endpoint: preselect the first one's. */
  async function guessEndpoint() {
    const first = (await file.slice(0, JSONL_PREVIEW_BYTES).text()).split('\n').find((l) => l.trim());
    try {
      const url = JSON.parse(first).url;
      if (ENDPOINTS.includes(url)) endpointSelect.value = url;
    } catch {
      // not JSON: the gateway will say so, per line
    }
    fillModels();
  }

  function fillModels() {
    const endpoint = endpointSelect.value;
    const previous = modelSelect.value;
    const offered = models.filter((m) => !m.endpoints || m.endpoints.includes(endpoint));
    replace(modelSelect, offered.map((m) => h('option', { value: m.id, selected: m.id === previous }, m.id)));
    modelHelp.textContent = offered.length ? '' : `No model serves ${endpoint}.`;
    systemField.hidden = !SYSTEM_PROMPT_ENDPOINTS.includes(endpoint);
  }

  async function refresh() {
    if (!file) return;
    preview.hidden = false;
    if (csvText !== null) {
      conversion = csvToRecords(csvText, options());
      replace(preview, h('h2', {}, 'Preview'), csvSummary(conversion));
      submit.disabled = Boolean(conversion.errors.length) || !modelSelect.value;
    } else {
      const head = await file.slice(0, JSONL_PREVIEW_BYTES).text();
      const lines = head.split('\n').filter((l) => l.trim()).slice(0, PREVIEW_RECORDS);
      replace(
        preview,
        h('h2', {}, 'Preview'),
        h('p', {}, `The first lines of the file (${lines.length} shown), sent as they are:`),
        h('pre', { class: 'jsonl', tabindex: 0, 'aria-label': 'First lines of the file' }, lines.join('\n')),
      );
      submit.disabled = false;
    }
  }

  function csvSummary(c) {
    if (c.errors.length) {
      return h('div', { class: 'error-box', role: 'alert' }, h('p', {}, 'This CSV cannot be used:'), h('ul', {}, c.errors.map((e) => h('li', {}, e))));
    }
    return [
      h(
        'p',
        { id: 'csv-summary' },
        `${formatCount(c.records.length)} request(s) from ${c.header ? 'the rows after the header' : 'every row'}`,
        c.skipped.length ? `; ${c.skipped.length} row(s) left out` : '',
        '. The first ones, as JSONL:',
      ),
      h(
        'pre',
        { class: 'jsonl', tabindex: 0, 'aria-label': 'Preview of the requests' },
        toJsonl(c.records.slice(0, PREVIEW_RECORDS)),
      ),
      c.skipped.length
        ? h('ul', { class: 'skipped' }, c.skipped.slice(0, 20).map((s) => h('li', {}, `Row ${s.row}: ${s.reason}`)))
        : null,
    ];
  }

  endpointSelect.addEventListener('change', () => {
    fillModels();
    refresh();
  });
  modelSelect.addEventListener('change', refresh);
  headerBox.addEventListener('change', refresh);
  let typing = null;
  systemPrompt.addEventListener('input', () => {
    clearTimeout(typing);
    typing = setTimeout(refresh, 200);
  });

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!file) return;
    const { metadata, error } = tags.read();
    if (error) {
      progressText.textContent = error;
      return;
    }
    submit.disabled = true;
    replace(result);
    const csv = csvText !== null ? conversion : null;
    let uploaded = null;
    try {
      progressText.textContent = `Uploading ${file.name}…`;
      uploaded = csv
        ? await uploadFile(new Blob([toJsonl(csv.records)], { type: 'application/jsonl' }), jsonlName(file.name))
        : await uploadFile(file, file.name);
      progressText.textContent = 'Creating the batch…';
      const batch = await createBatch({
        input_file_id: uploaded.id,
        endpoint: endpointSelect.value,
        completion_window: windowInput.value.trim(),
        priority: prioritySelect.value === 'number' ? Number(priorityNumber.value || 0) : prioritySelect.value,
        metadata,
      });
      progressText.textContent = '';
      showCreated(batch, csv);
    } catch (err) {
      progressText.textContent = '';
      if (uploaded) deleteFile(uploaded.id).catch(() => {}); // nothing will use it
      if (!(err instanceof ApiError && err.status === 401)) showRefused(err, csv);
    } finally {
      submit.disabled = false;
    }
  });

  function sourceColumn(csv) {
    if (!csv) return {};
    return { sourceLabel: 'CSV row', sourceOf: (line) => csv.sources[line - 1]?.row };
  }

  function showCreated(batch, csv) {
    const link = h('a', { href: `#/batches/${encodeURIComponent(batch.id)}`, class: 'mono' }, batch.id);
    const counts = batch.request_counts;
    replace(
      result,
      h(
        'div',
        { class: 'card success', role: 'status' },
        h('h2', {}, 'Batch created'),
        h('p', {}, link, ` holds ${formatCount(counts.total)} request(s); ${formatCount(batch.rejected_count)} rejected.`),
        h('p', {}, h('a', { class: 'button primary', href: `#/batches/${encodeURIComponent(batch.id)}` }, 'Follow the batch')),
      ),
      batch.rejected_count ? rejectionsCard(batch, csv) : null,
    );
    link.focus();
  }

  function rejectionsCard(answer, csv) {
    const shown = answer.rejected_records || [];
    return h(
      'div',
      { class: 'card', id: 'create-rejections' },
      h('h2', {}, 'Rejected records'),
      h(
        'p',
        {},
        `${formatCount(answer.rejected_count)} record(s) were rejected and will not run`,
        answer.rejected_count > shown.length ? `; the first ${shown.length} are listed.` : '.',
      ),
      rejectionTable(shown, sourceColumn(csv)),
    );
  }

  function showRefused(err, csv) {
    const rejected = err.error?.rejected_records ? err.error : null;
    replace(result, errorBox(`The batch was not created: ${err.message}`), rejected ? rejectionsCard(rejected, csv) : null);
  }

  listModels()
    .then((answer) => {
      models = answer.data;
      fillModels();
      refresh();
    })
    .catch((err) => {
      if (!(err instanceof ApiError && err.status === 401)) replace(modelHelp, `Models could not be listed: ${err.message}`);
    });
}

function jsonlName(name) {
  return name.replace(/\.[^.]*$/, '') + '.jsonl';
}
