// CSV with one prompt per row → batch input records, as the API accepts them.
//
// Parsing follows RFC 4180 (quoted fields, doubled quotes, line breaks inside quotes, CRLF or
// LF) with Papa Parse, which also drops a UTF-8 byte order mark. The delimiter is always a
// comma, as the RFC says: guessing it could split a prompt at a semicolon.
//
// A header row is recognised by its names: a column called `prompt` (or input, text,
// question, content, message) holds the prompts, an optional `custom_id` (or id) column the
// ids. Without a header the file must have one column. Each data row N (counted from 1 after
// the header; blank rows count too, so ids follow the spreadsheet's rows) becomes one record
// with `custom_id` `row-N` unless the row names its own.

const PROMPT_COLUMNS = ['prompt', 'prompts', 'input', 'text', 'question', 'content', 'message'];
const ID_COLUMNS = ['custom_id', 'id'];
export const ENDPOINTS = ['/v1/chat/completions', '/v1/responses', '/v1/completions', '/v1/embeddings'];
export const SYSTEM_PROMPT_ENDPOINTS = ['/v1/chat/completions', '/v1/responses'];

const normalise = (cell) => String(cell).trim().toLowerCase();

/** The request body for one prompt, in the shape `endpoint` takes. */
export function requestBody(endpoint, model, prompt, systemPrompt = '') {
  switch (endpoint) {
    case '/v1/chat/completions': {
      const messages = systemPrompt ? [{ role: 'system', content: systemPrompt }] : [];
      messages.push({ role: 'user', content: prompt });
      return { model, messages };
    }
    case '/v1/responses':
      return systemPrompt ? { model, instructions: systemPrompt, input: prompt } : { model, input: prompt };
    case '/v1/completions':
      return { model, prompt };
    case '/v1/embeddings':
      return { model, input: prompt };
    default:
      throw new Error(`Unsupported endpoint ${endpoint}`);
  }
}

/** Whether `row` (the first row of a file) looks like a header: it names a prompt or id column. */
export function looksLikeHeader(row) {
  return row.some((cell) => PROMPT_COLUMNS.includes(normalise(cell)) || ID_COLUMNS.includes(normalise(cell)));
}

/** RFC 4180 rows of `text` (string[][]), and Papa Parse's errors as messages. */
export function parseRows(text, Papa = globalThis.Papa) {
  const parsed = Papa.parse(text, { delimiter: ',', skipEmptyLines: false });
  const rows = parsed.data;
  // A final line break ends the last row; it does not start an empty one.
  if (rows.length && rows[rows.length - 1].length === 1 && rows[rows.length - 1][0] === '') rows.pop();
  const errors = parsed.errors.map((e) => `Record ${e.row + 1} of the file: ${e.message}.`);
  return { rows, errors };
}

function columnsOf(headerRow) {
  const names = headerRow.map(normalise);
  const prompt = names.findIndex((name) => PROMPT_COLUMNS.includes(name));
  const id = names.findIndex((name) => ID_COLUMNS.includes(name));
  return { prompt, id: id === -1 ? null : id };
}

/**
 * Converts CSV `text` to records.
 * options: {endpoint, model, systemPrompt, header: 'auto' | true | false}
 * Answers {records, sources, header, skipped, errors}:
 *   records  the input records (custom_id, method, url, body)
 *   sources  for each record, its CSV row: {row (data row number), line (first file line)}
 *   header   whether the first row was taken as a header
 *   skipped  rows left out: {row, reason} (blank rows are left out silently)
 *   errors   messages: problems that make the file unusable (records is empty then)
 */
export function csvToRecords(text, options, Papa = globalThis.Papa) {
  const { endpoint, model, systemPrompt = '', header = 'auto' } = options;
  const { rows, errors: parseErrors } = parseRows(text, Papa);
  const result = { records: [], sources: [], header: false, skipped: [], errors: [] };
  if (parseErrors.length) {
    result.errors = parseErrors;
    return result;
  }
  if (!rows.length) {
    result.errors.push('The file has no rows.');
    return result;
  }
  result.header = header === 'auto' ? looksLikeHeader(rows[0]) : Boolean(header);
  let columns = { prompt: 0, id: null };
  if (result.header) {
    columns = columnsOf(rows[0]);
    if (columns.prompt === -1) {
      const names = PROMPT_COLUMNS.map((n) => `"${n}"`).join(', ');
      result.errors.push(`The header names no prompt column (one of ${names}).`);
      return result;
    }
  }
  const data = result.header ? rows.slice(1) : rows;
  let line = 1 + (result.header ? lineCount(rows[0]) : 0);
  data.forEach((cells, index) => {
    const row = index + 1;
    const firstLine = line;
    line += lineCount(cells);
    if (cells.every((cell) => cell.trim() === '')) return;
    if (!result.header && cells.length > 1) {
      result.errors.push(
        `Row ${row} has ${cells.length} fields: quote prompts that contain commas, ` +
          'or add a header row naming the prompt column.',
      );
      return;
    }
    const prompt = cells[columns.prompt] ?? '';
    if (prompt.trim() === '') {
      result.skipped.push({ row, reason: 'empty prompt' });
      return;
    }
    const ownId = columns.id === null ? '' : (cells[columns.id] ?? '').trim();
    result.records.push({
      custom_id: ownId || `row-${row}`,
      method: 'POST',
      url: endpoint,
      body: requestBody(endpoint, model, prompt, SYSTEM_PROMPT_ENDPOINTS.includes(endpoint) ? systemPrompt : ''),
    });
    result.sources.push({ row, line: firstLine });
  });
  if (result.errors.length) result.records = [];
  else if (!result.records.length) result.errors.push('The file has no prompt.');
  return result;
}

// How many file lines a parsed row spans: its quoted line breaks plus its own.
function lineCount(cells) {
  return 1 + cells.reduce((n, cell) => n + (cell.match(/\r\n|\r|\n/g) || []).length, 0);
}

/** Records → JSONL text (one record per line, `\n` line ends, a final line break). */
export function toJsonl(records) {
  return records.map((record) => JSON.stringify(record)).join('\n') + (records.length ? '\n' : '');
}
