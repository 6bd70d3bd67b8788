// Unit tests of the panel's CSV → records conversion (gateway/ui/csv.js), with the Papa Parse
// build the panel serves. Run by tests/unit/test_panel_js.py (`node --test`).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';

import {
  csvToRecords,
  looksLikeHeader,
  parseRows,
  requestBody,
  toJsonl,
} from '../../../gateway/ui/csv.js';

const Papa = createRequire(import.meta.url)('../../../gateway/ui/node_modules/papaparse/papaparse.min.js');
const CHAT = { endpoint: '/v1/chat/completions', model: 'gpt-4o-mini' };
const convert = (text, options = {}) => csvToRecords(text, { ...CHAT, ...options }, Papa);
const prompts = (result) => result.records.map((r) => r.body.messages.at(-1).content);
const ids = (result) => result.records.map((r) => r.custom_id);

describe('RFC 4180 parsing', () => {
  test('quoted fields keep commas, doubled quotes and line breaks', () => {
    const { rows, errors } = parseRows('"a, b","say ""hi""","one\ntwo"\r\n"x\r\ny",2,3\r\n', Papa);
    assert.deepEqual(errors, []);
    assert.deepEqual(rows, [
      ['a, b', 'say "hi"', 'one\ntwo'],
      ['x\r\ny', '2', '3'],
    ]);
  });

  test('a UTF-8 byte order mark is not part of the first field', () => {
    const result = convert('\ufeffprompt\nHello\n');
    assert.equal(result.header, true);
    assert.deepEqual(prompts(result), ['Hello']);
  });

  test('CRLF, LF and a missing final line break read the same', () => {
    for (const text of ['A\r\nB\r\n', 'A\nB\n', 'A\nB']) assert.deepEqual(prompts(convert(text)), ['A', 'B']);
  });

  test('the delimiter is a comma, never guessed', () => {
    assert.deepEqual(prompts(convert('prompt\nuse a; b; c\n')), ['use a; b; c']);
  });

  test('an unterminated quote makes the file unusable, naming the record', () => {
    const result = convert('prompt\n"open\nmore\n');
    assert.deepEqual(result.records, []);
    assert.match(result.errors[0], /Record 2 of the file: Quoted field unterminated/);
  });
});

describe('header row', () => {
  test('is recognised by a prompt or custom_id column name, in any case', () => {
    assert.equal(looksLikeHeader(['Prompt']), true);
    assert.equal(looksLikeHeader([' custom_id ', 'text']), true);
    assert.equal(looksLikeHeader(['What is 2+2?']), false);
  });

  test('names the prompt and custom_id columns in any order', () => {
    const result = convert('custom_id,question,notes\nq1,First?,x\n,Second?,y\n');
    assert.deepEqual(prompts(result), ['First?', 'Second?']);
    assert.deepEqual(ids(result), ['q1', 'row-2']);
  });

  test('can be forced either way', () => {
    assert.deepEqual(prompts(convert('prompt\nHi\n', { header: false })), ['prompt', 'Hi']);
    assert.match(convert('Title\nHi\n', { header: true }).errors[0], /names no prompt column/);
  });

  test('without a prompt column is an error', () => {
    const result = convert('custom_id,body\na,b\n');
    assert.match(result.errors[0], /names no prompt column/);
  });
});

describe('rows to records', () => {
  test('custom_id is row-N, N the data row; blank rows keep the numbering', () => {
    const result = convert('prompt\nfirst\n\nthird\n,\nfifth\n');
    assert.deepEqual(ids(result), ['row-1', 'row-3', 'row-5']);
    assert.deepEqual(result.sources, [
      { row: 1, line: 2 },
      { row: 3, line: 4 },
      { row: 5, line: 6 },
    ]);
  });

  test('source lines count the line breaks inside quoted prompts', () => {
    const result = convert('"two\nlines"\nnext\n');
    assert.deepEqual(result.sources, [
      { row: 1, line: 1 },
      { row: 2, line: 3 },
    ]);
  });

  test('rows with an empty prompt are left out and reported', () => {
    const result = convert('custom_id,prompt\na,   \nb,real\n');
    assert.deepEqual(ids(result), ['b']);
    assert.deepEqual(result.skipped, [{ row: 1, reason: 'empty prompt' }]);
  });

  test('several fields without a header is an error naming the row', () => {
    const result = convert('fine\nHello, world\n');
    assert.deepEqual(result.records, []);
    assert.match(result.errors[0], /Row 2 has 2 fields/);
  });

  test('a file with no prompt is an error', () => {
    assert.match(convert('').errors[0], /no rows/);
    assert.match(convert('prompt\n\n').errors[0], /no prompt/);
  });

  test('each record is a full input-file line for the chosen endpoint and model', () => {
    const result = convert('prompt\nHi\n', { systemPrompt: 'Be brief.' });
    assert.deepEqual(result.records, [
      {
        custom_id: 'row-1',
        method: 'POST',
        url: '/v1/chat/completions',
        body: {
          model: 'gpt-4o-mini',
          messages: [
            { role: 'system', content: 'Be brief.' },
            { role: 'user', content: 'Hi' },
          ],
        },
      },
    ]);
  });

  test('prompts are kept exactly, spaces and unicode included', () => {
    assert.deepEqual(prompts(convert('prompt\n"  spaced  "\nnaïve ☃\n')), ['  spaced  ', 'naïve ☃']);
  });
});

describe('request bodies per endpoint', () => {
  test('chat puts the system prompt first, only when given', () => {
    assert.deepEqual(requestBody('/v1/chat/completions', 'm', 'p'), {
      model: 'm',
      messages: [{ role: 'user', content: 'p' }],
    });
  });

  test('responses use instructions; completions and embeddings take the prompt alone', () => {
    assert.deepEqual(requestBody('/v1/responses', 'm', 'p', 's'), { model: 'm', instructions: 's', input: 'p' });
    assert.deepEqual(requestBody('/v1/completions', 'm', 'p'), { model: 'm', prompt: 'p' });
    assert.deepEqual(requestBody('/v1/embeddings', 'm', 'p'), { model: 'm', input: 'p' });
  });

  test('a system prompt is not sent where the endpoint has none', () => {
    const result = convert('prompt\nHi\n', { endpoint: '/v1/embeddings', model: 'e', systemPrompt: 'ignored' });
    assert.deepEqual(result.records[0].body, { model: 'e', input: 'Hi' });
  });

  test('an unknown endpoint is refused', () => {
    assert.throws(() => requestBody('/v1/audio', 'm', 'p'), /Unsupported endpoint/);
  });
});

test('JSONL has one record per line and a final line break', () => {
  const records = [{ a: 'x\ny' }, { b: 2 }];
  assert.equal(toJsonl(records), '{"a":"x\\ny"}\n{"b":2}\n');
  assert.equal(toJsonl([]), '');
});
