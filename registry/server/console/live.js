// The live view: the server's own metrics read every few seconds, shown as
// requests/s by operation, beats/s, push rates and latency, and memory.

import { get, metricsText } from './api.js';
import { el, table, bytes, notify } from './dom.js';
import { parse, total, totalsBy, intervalStats } from './metrics.js';

const EVERY_MS = 2000;
const HISTORY = 60;

function ms(seconds) {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return '—';
  return seconds < 0.001 ? `${(seconds * 1e6).toFixed(0)} µs` : `${(seconds * 1e3).toFixed(1)} ms`;
}

function rate(n) {
  return n >= 100 ? n.toFixed(0) : n.toFixed(1);
}

function card(label, value, id) {
  return el('div', { class: 'stat' }, el('div', { class: 'stat-label' }, label), el('div', { class: 'stat-value', id }, value));
}

// Draws the history of total requests/s as a line.
function draw(canvas, points) {
  const ctx = canvas.getContext('2d');
  const { width, height } = canvas;
  ctx.clearRect(0, 0, width, height);
  const max = Math.max(1, ...points);
  ctx.strokeStyle = '#2f6fde';
  ctx.lineWidth = 2;
  ctx.beginPath();
  points.forEach((v, i) => {
    const x = (i / (HISTORY - 1)) * width;
    const y = height - 4 - (v / max) * (height - 8);
    if (i === 0) ctx.moveTo(x, y); else ctx.lineTo(x, y);
  });
  ctx.stroke();
  ctx.fillStyle = '#667';
  ctx.font = '12px sans-serif';
  ctx.fillText(`max ${rate(max)}/s`, 6, 14);
}

function section(state, before, after, seconds, history) {
  const byRoute = totalsBy(after, 'registry_http_requests_total', 'route');
  const prev = totalsBy(before, 'registry_http_requests_total', 'route');
  const ops = [...byRoute.entries()]
    .map(([route, n]) => ({ route, perSecond: (n - (prev.get(route) || 0)) / seconds, total: n }))
    .sort((a, b) => b.perSecond - a.perSecond || a.route.localeCompare(b.route));
  const errors = (total(after, 'registry_http_requests_total', (l) => l.status !== '200')
    - total(before, 'registry_http_requests_total', (l) => l.status !== '200')) / seconds;
  const all = ops.reduce((a, o) => a + o.perSecond, 0);
  history.push(all);
  while (history.length > HISTORY) history.shift();
  const per = (name) => (total(after, name) - total(before, name)) / seconds;
  const push = intervalStats(before, after, 'registry_push_change_to_send_seconds');
  const rtt = intervalStats(before, after, 'registry_push_round_trip_seconds');
  return [
    el('div', { class: 'stats' },
      card('Requests/s', rate(all), 'live-total'),
      card('Errors/s', rate(errors), 'live-errors'),
      card('Beats/s', rate(per('registry_beats_total')), 'live-beats'),
      card('Pushes/s', rate(per('registry_push_sent_total')), 'live-pushes'),
      card('Change → push (mean / p99 ≤)', push ? `${ms(push.mean)} / ${ms(push.quantileBound)}` : '—', 'live-push-latency'),
      card('Push round trip (mean)', rtt ? ms(rtt.mean) : '—', 'live-rtt'),
      card('Resident memory', bytes(state.rss_bytes), 'live-rss'),
      card('Services / instances', `${state.services.toLocaleString()} / ${state.instances.toLocaleString()}`, 'live-counts'),
      card('Subscribers', state.subscribers.toLocaleString(), 'live-subscribers')),
    el('h2', {}, 'Requests/s over the last two minutes'),
    el('canvas', { id: 'live-chart', width: 900, height: 120 }),
    el('h2', {}, 'By operation'),
    table(['Operation', '#Requests/s', '#Total'], ops, (o) => el('tr', { class: 'op-row', dataset: { route: o.route } },
      el('td', { class: 'mono' }, o.route),
      el('td', { class: 'num' }, rate(o.perSecond)),
      el('td', { class: 'num' }, o.total.toLocaleString())), 'No requests yet.'),
  ];
}

export async function render(root) {
  const body = el('div', { id: 'live-body' }, el('p', { class: 'muted' }, 'Reading metrics…'));
  root.replaceChildren(el('h1', {}, 'Live ', el('span', { class: 'muted small' }, `every ${EVERY_MS / 1000} s`)), body);
  const history = [];
  let before = null;
  let at = 0;
  let stopped = false;
  const tick = async () => {
    try {
      const [text, state] = await Promise.all([metricsText(), get('/nacos/v1/console/server/state')]);
      if (stopped) return;
      const now = performance.now();
      const after = parse(text);
      if (before) {
        const parts = section(state, before, after, Math.max(0.001, (now - at) / 1000), history);
        body.replaceChildren(...parts);
        draw(document.getElementById('live-chart'), history);
        body.dataset.samples = String(history.length);
      }
      before = after;
      at = now;
    } catch (e) {
      notify(`Metrics unavailable: ${e.message}`, 'error');
    }
  };
  await tick();
  const timer = setInterval(tick, EVERY_MS);
  return () => { stopped = true; clearInterval(timer); };
}
