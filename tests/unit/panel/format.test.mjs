// Unit tests of the panel's formatting and rate/ETA (gateway/ui/format.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { RateMeter, formatDuration, formatUsd, isTerminal, progressOf } from '../../../gateway/ui/format.js';

test('durations are spelled like the command-line client', () => {
  assert.equal(formatDuration(42.4), '42s');
  assert.equal(formatDuration(185), '3m05s');
  assert.equal(formatDuration(7620), '2h07m');
});

test('the rate is measured over the last 30 seconds of observations', () => {
  const meter = new RateMeter(30);
  assert.equal(meter.rate(), null);
  meter.observe(0, 0);
  assert.equal(meter.rate(), null);
  meter.observe(10, 100);
  assert.equal(meter.rate(), 10);
  meter.observe(40, 160); // the sample at t=0 leaves the window
  assert.equal(meter.rate(), 2);
  assert.equal(meter.eta(20), 10);
});

test('no progress means no rate and no ETA', () => {
  const meter = new RateMeter();
  meter.observe(0, 5);
  meter.observe(5, 5);
  assert.equal(meter.rate(), null);
  assert.equal(meter.eta(10), null);
});

test('progress counts failed requests as done', () => {
  const batch = { request_counts: { total: 8, completed: 3, failed: 1 } };
  assert.deepEqual(progressOf(batch), { total: 8, completed: 3, failed: 1, done: 4, percent: 50 });
  assert.equal(progressOf({ request_counts: { total: 0, completed: 0, failed: 0 } }).percent, 0);
});

test('small costs keep their digits', () => {
  assert.equal(formatUsd(0.00027), '$0.000270');
  assert.equal(formatUsd(12.5), '$12.50');
  assert.equal(formatUsd(0), '$0.00');
});

test('a cost below a millionth of a dollar is not shown as zero', () => {
  assert.equal(formatUsd(9e-8), '$0.00000009');
  assert.equal(formatUsd(1.25e-7), '$0.00000013');
  assert.equal(formatUsd(5e-7), '$0.0000005');
  assert.equal(formatUsd(0.000001), '$0.000001');
  assert.equal(formatUsd(1e-13), '< $0.000000000001');
  assert.equal(formatUsd(1e-300), '< $0.000000000001');
});

test('terminal statuses', () => {
  assert.equal(isTerminal('cancelled'), true);
  assert.equal(isTerminal('cancelling'), false);
});
