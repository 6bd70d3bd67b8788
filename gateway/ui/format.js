// Formatting for people: times, durations, counts, money, rate and ETA.

const TERMINAL_STATUSES = ['completed', 'failed', 'expired', 'cancelled'];
export const STATUSES = ['in_progress', 'cancelling', 'finalizing', 'completed', 'failed', 'expired', 'cancelled'];

export function isTerminal(status) {
  return TERMINAL_STATUSES.includes(status);
}

/** Unix seconds → local date and time, e.g. `2026-12-01 09:03:16`; '—' for null. */
export function formatTime(unixSeconds) {
  if (unixSeconds === null || unixSeconds === undefined) return '—';
  const d = new Date(unixSeconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`
  );
}

/** Seconds → `42s`, `3m05s`, `2h07m` (the command-line client's spelling). */
export function formatDuration(seconds) {
  const s = Math.round(seconds);
  const pad = (n) => String(n).padStart(2, '0');
  if (s >= 3600) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  return `${s}s`;
}

export function formatCount(n) {
  return Number(n || 0).toLocaleString('en-US');
}

const MICRO_USD = 0.000001;
const SMALLEST_USD = 1e-12; // below it, `< $0.000000000001` rather than a long row of zeros
const TWO_SIGNIFICANT = new Intl.NumberFormat('en-US', { maximumSignificantDigits: 2, useGrouping: false });

/**
 * USD with enough digits for small batch costs: `$0.000270`, `$12.50`, `$0.00`. An amount that
 * is not zero never reads as zero: below a millionth of a dollar it keeps two significant digits
 * (`$0.00000009`).
 */
export function formatUsd(amount) {
  const value = Number(amount || 0);
  const size = Math.abs(value);
  if (value === 0 || size >= 1) return `$${value.toFixed(2)}`;
  if (size >= MICRO_USD) return `$${value.toFixed(6)}`;
  if (size < SMALLEST_USD) return `${value < 0 ? '> $-' : '< $'}${SMALLEST_USD.toFixed(12)}`;
  return `$${TWO_SIGNIFICANT.format(value)}`;
}

export function formatBytes(bytes) {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/** Items finished per second over the last `windowS` seconds of observations (as the CLI's). */
export class RateMeter {
  constructor(windowS = 30) {
    this.windowS = windowS;
    this.samples = [];
  }

  observe(nowS, done) {
    this.samples.push([nowS, done]);
    while (this.samples.length > 2 && nowS - this.samples[1][0] >= this.windowS) this.samples.shift();
  }

  /** Items per second, or null while unknown (one sample, or nothing moved). */
  rate() {
    if (this.samples.length < 2) return null;
    const [t0, d0] = this.samples[0];
    const [t1, d1] = this.samples[this.samples.length - 1];
    if (t1 <= t0 || d1 <= d0) return null;
    return (d1 - d0) / (t1 - t0);
  }

  /** Seconds until `remaining` more items finish at the current rate, or null. */
  eta(remaining) {
    const rate = this.rate();
    return rate ? remaining / rate : null;
  }
}

/** `request_counts` → {total, completed, failed, done, percent}. */
export function progressOf(batch) {
  const counts = batch.request_counts || {};
  const total = counts.total || 0;
  const completed = counts.completed || 0;
  const failed = counts.failed || 0;
  const done = completed + failed;
  return { total, completed, failed, done, percent: total ? Math.floor((100 * done) / total) : 0 };
}
