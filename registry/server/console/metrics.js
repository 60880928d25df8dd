// Reading the server's Prometheus text (`/metrics`) and turning two
// readings into rates and latencies over the interval between them.

// Parses the text exposition format into `{name, labels, value}` samples.
// Label values are read as plain text; nothing here reaches the page as
// markup.
export function parse(text) {
  const samples = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)$/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const pair of (m[3] || '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2];
    }
    samples.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return samples;
}

// Sum of the samples named `name` whose labels pass `keep`.
export function total(samples, name, keep = () => true) {
  return samples.filter((s) => s.name === name && keep(s.labels)).reduce((a, s) => a + s.value, 0);
}

// Sums of `name` grouped by the value of label `by`.
export function totalsBy(samples, name, by) {
  const out = new Map();
  for (const s of samples) {
    if (s.name !== name) continue;
    const key = s.labels[by];
    out.set(key, (out.get(key) || 0) + s.value);
  }
  return out;
}

// A histogram's cumulative buckets as [[upperBound, count], …], ascending.
function buckets(samples, name) {
  return samples
    .filter((s) => s.name === `${name}_bucket`)
    .map((s) => [s.labels.le === '+Inf' ? Infinity : Number(s.labels.le), s.value])
    .sort((a, b) => a[0] - b[0]);
}

// The mean and an upper bound of quantile `q` of what a histogram recorded
// between two readings; `null` when nothing was recorded.
export function intervalStats(before, after, name, q = 0.99) {
  const count = total(after, `${name}_count`) - total(before, `${name}_count`);
  if (!(count > 0)) return null;
  const sum = total(after, `${name}_sum`) - total(before, `${name}_sum`);
  const a = buckets(after, name);
  const b = new Map(buckets(before, name));
  let bound = Infinity;
  for (const [le, cumulative] of a) {
    if (cumulative - (b.get(le) || 0) >= q * count) { bound = le; break; }
  }
  return { count, mean: sum / count, quantileBound: bound };
}
