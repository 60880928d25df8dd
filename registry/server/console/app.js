// The console's shell: reads the server state, decides whether a login is
// needed, routes `#/view?params` to a view module, and shows the cluster
// page only when the server answers the cluster members endpoint.

import { get, token, setToken } from './api.js';
import { el, notify } from './dom.js';
import * as namespaces from './namespaces.js';
import * as services from './services.js';
import * as service from './service.js';
import * as cluster from './cluster.js';
import * as live from './live.js';
import * as login from './login.js';

const views = { namespaces, services, service, cluster, live, login };
const shell = { authEnabled: false, stop: null, hasCluster: false };

function parseHash() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [name, q = ''] = hash.split('?');
  return { name: name || 'services', params: Object.fromEntries(new URLSearchParams(q)) };
}

async function route() {
  if (shell.stop) { shell.stop(); shell.stop = null; }
  let { name, params } = parseHash();
  if (shell.authEnabled && !token() && name !== 'login') name = 'login';
  const view = views[name] || services;
  for (const a of document.querySelectorAll('#nav a')) {
    a.classList.toggle('active', a.dataset.view === name);
  }
  document.getElementById('logout').hidden = !(shell.authEnabled && token());
  const root = document.getElementById('view');
  root.replaceChildren(el('p', { class: 'muted' }, 'Loading…'));
  document.getElementById('notice').replaceChildren();
  try {
    shell.stop = (await view.render(root, params, shell)) || null;
  } catch (e) {
    root.replaceChildren(el('p', { class: 'error' }, `Could not load: ${e.message}`));
  }
  root.dataset.ready = name;
}

// Shows the Cluster page only where the endpoint answers with members.
async function probeCluster() {
  try {
    const nodes = cluster.membersOf(await get('/nacos/v1/core/cluster/nodes'));
    shell.hasCluster = Array.isArray(nodes);
  } catch {
    shell.hasCluster = false;
  }
  document.getElementById('nav-cluster').hidden = !shell.hasCluster;
}

async function boot() {
  const logout = document.getElementById('logout');
  logout.addEventListener('click', () => {
    setToken(null);
    if (location.hash === '#/login') route(); else location.hash = '#/login';
  });
  window.addEventListener('hashchange', route);
  window.addEventListener('registry:denied', () => {
    if (shell.authEnabled) {
      setToken(null);
      notify('Your session ended: please log in again.', 'error');
      location.hash = '#/login';
    }
  });
  try {
    const state = await get('/nacos/v1/console/server/state');
    shell.authEnabled = state.auth_enabled;
    document.getElementById('server-info').textContent =
      `v${state.version} · ${state.standalone_mode}${state.auth_enabled ? ' · auth on' : ''}`;
  } catch (e) {
    notify(`Server state unavailable: ${e.message}`, 'error');
  }
  if (!shell.authEnabled || token()) await probeCluster();
  shell.onLogin = probeCluster;
  await route();
}

boot();
