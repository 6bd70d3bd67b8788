// Unit tests of the panel's API helpers that need no gateway (gateway/ui/api.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

// api.js places the API next to the page (document.baseURI) when it loads.
globalThis.document = { baseURI: 'http://127.0.0.1:8080/ui/' };
const { ApiError, isTransient, keyProblem, query } = await import('../../../gateway/ui/api.js');

test('a key of printable ASCII has no problem', () => {
  assert.equal(keyProblem('bg-Abc_123-xyz'), null);
  assert.equal(keyProblem(''), null);
  assert.equal(keyProblem(null), null);
});

test('a character no key has is named, visible or not', () => {
  assert.match(keyProblem('bg-KehfTP…'), /“…” \(U\+2026\), a character no API key has/);
  assert.match(keyProblem('bg-abc\u200b'), /contains U\+200B,/);
  assert.match(keyProblem('bg-a b'), /contains U\+0020,/);
  assert.match(keyProblem('bg-clé'), /“é” \(U\+00E9\)/);
  assert.match(keyProblem('bg-\u{1F511}'), /U\+1F511/);
});

test('only an outage or an overloaded gateway is worth asking again', () => {
  const answer = (status, code) => new ApiError(status, { code, message: 'x' });
  assert.ok(isTransient(answer(0, 'unreachable')));
  assert.ok(isTransient(answer(503)));
  assert.ok(isTransient(answer(429, 'rate_limit_exceeded')));
  assert.ok(isTransient(new SyntaxError('not JSON')));
  assert.ok(!isTransient(answer(0, 'invalid_key_characters')));
  assert.ok(!isTransient(answer(400, 'invalid_after')));
  assert.ok(!isTransient(answer(403, 'insufficient_scope')));
});

test('a query spells spaces %20: the gateway reads a + as a plus', () => {
  assert.equal(
    query({ limit: 10, after: undefined, status: '', metadata_key: ' sp ', metadata_value: 'a+b&c=d é' }),
    '?limit=10&metadata_key=%20sp%20&metadata_value=a%2Bb%26c%3Dd%20%C3%A9',
  );
  assert.equal(query({ after: null }), '');
});
