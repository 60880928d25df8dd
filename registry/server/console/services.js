// Services of a namespace: search by name and group, paging, and counts of
// instances, healthy instances and subscribers per service. Also the
// "take an IP offline" action, which finds every instance of the IP and
// changes each through the public API.

import { get, change, LAYER } from './api.js';
import { el, table, viewLink, notify } from './dom.js';

const PAGE_SIZES = [10, 20, 50, 100];

function go(params) {
  location.hash = `#/services?${new URLSearchParams(params)}`;
}

function searchForm(p) {
  const name = el('input', { id: 'search-name', type: 'search', placeholder: 'service name contains', value: p.name });
  const group = el('input', { id: 'search-group', type: 'search', placeholder: 'group contains', value: p.group });
  const size = el('select', { id: 'page-size' },
    PAGE_SIZES.map((n) => el('option', { value: String(n), selected: n === p.pageSize }, `${n} per page`)));
  return el('form', {
    class: 'toolbar',
    onsubmit: (event) => {
      event.preventDefault();
      go({ namespaceId: p.namespaceId, name: name.value.trim(), group: group.value.trim(), page: 1, size: size.value });
    },
  }, name, group, size, el('button', { id: 'search-submit', type: 'submit' }, 'Search'));
}

function pager(p, count) {
  const pages = Math.max(1, Math.ceil(count / p.pageSize));
  const to = (page) => () => go({ namespaceId: p.namespaceId, name: p.name, group: p.group, page, size: p.pageSize });
  return el('div', { class: 'pager' },
    el('button', { type: 'button', disabled: p.page <= 1, onclick: to(p.page - 1) }, '‹ Previous'),
    el('span', { id: 'page-info' }, `Page ${p.page} of ${pages} · ${count.toLocaleString()} services`),
    el('button', { type: 'button', disabled: p.page >= pages, onclick: to(p.page + 1) }, 'Next ›'));
}

// Disables (or enables) every instance at `ip` across services, one
// public-API call each, and reports what it did.
export async function setIpEnabled(ip, enabled, namespaceId) {
  const found = await get('/nacos/v1/console/instances', { ip, namespaceId });
  const todo = found.list.filter((i) => i.enabled !== enabled);
  let done = 0;
  const failed = [];
  for (const i of todo) {
    try {
      await change('PUT', LAYER, {
        namespaceId: i.namespaceId,
        serviceName: i.serviceName,
        groupName: i.groupName,
        clusterName: i.clusterName,
        ip: i.ip,
        port: i.port,
        ephemeral: i.ephemeral,
        weight: i.weight,
        enabled,
      });
      done += 1;
    } catch (e) {
      failed.push(`${i.groupName}@@${i.serviceName} ${i.ip}:${i.port}: ${e.message}`);
    }
  }
  const services = new Set(todo.map((i) => `${i.namespaceId}/${i.groupName}@@${i.serviceName}`)).size;
  return { found: found.count, done, services, failed, truncated: found.truncated };
}

function ipForm(namespaceId) {
  const ip = el('input', { id: 'offline-ip', placeholder: 'IP address, e.g. 10.0.0.7', required: true });
  const scope = el('select', { id: 'offline-scope' },
    el('option', { value: '' }, 'in every namespace'),
    el('option', { value: namespaceId }, `in ${namespaceId} only`));
  const run = (enabled) => async () => {
    if (!ip.reportValidity()) return;
    try {
      const r = await setIpEnabled(ip.value.trim(), enabled, scope.value);
      const verb = enabled ? 'enabled' : 'disabled';
      const msg = `${verb} ${r.done} instances of ${ip.value.trim()} in ${r.services} services`
        + ` (${r.found} found${r.truncated ? ', list truncated' : ''})`;
      notify(r.failed.length ? `${msg}; failed: ${r.failed.join('; ')}` : msg, r.failed.length ? 'error' : 'ok');
    } catch (e) {
      notify(`Could not change ${ip.value}: ${e.message}`, 'error');
    }
  };
  return el('details', { class: 'card' },
    el('summary', {}, 'Take an IP out of traffic across services'),
    el('div', { class: 'toolbar' }, ip, scope,
      el('button', { id: 'offline-disable', type: 'button', class: 'danger', onclick: run(false) }, 'Disable all'),
      el('button', { id: 'offline-enable', type: 'button', onclick: run(true) }, 'Enable all')));
}

export async function render(root, params) {
  const p = {
    namespaceId: params.namespaceId || 'public',
    name: params.name || '',
    group: params.group || '',
    page: Math.max(1, Number.parseInt(params.page, 10) || 1),
    pageSize: PAGE_SIZES.includes(Number(params.size)) ? Number(params.size) : 10,
  };
  const started = performance.now();
  const r = await get('/nacos/v1/ns/catalog/services', {
    namespaceId: p.namespaceId,
    serviceNameParam: p.name,
    groupNameParam: p.group,
    pageNo: p.page,
    pageSize: p.pageSize,
  });
  const elapsed = performance.now() - started;
  const rows = table(
    ['Service', 'Group', '#Clusters', '#Instances', '#Healthy', '#Disabled', '#Subscribers'],
    r.serviceList,
    (s) => el('tr', { class: 'service-row', dataset: { service: s.name, group: s.groupName } },
      el('td', {}, viewLink('service', { namespaceId: p.namespaceId, serviceName: s.name, groupName: s.groupName }, s.name)),
      el('td', {}, s.groupName),
      el('td', { class: 'num' }, s.clusterCount),
      el('td', { class: 'num ip-count' }, s.ipCount),
      el('td', { class: `num healthy-count ${s.healthyInstanceCount < s.ipCount ? 'warn' : ''}` }, s.healthyInstanceCount),
      el('td', { class: 'num' }, s.disabledInstanceCount),
      el('td', { class: 'num subscriber-count' }, s.subscriberCount)),
    p.name || p.group ? 'No service matches.' : 'No services in this namespace.',
  );
  root.replaceChildren(
    el('h1', {}, 'Services ', el('span', { class: 'muted' }, `in ${p.namespaceId}`)),
    searchForm(p),
    rows,
    pager(p, r.count),
    el('p', { class: 'muted small' }, `Answered in ${elapsed.toFixed(0)} ms.`),
    ipForm(p.namespaceId),
  );
}
