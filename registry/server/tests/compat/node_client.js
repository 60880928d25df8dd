// Drives the real Node client nacos@2.6.3 against a registry.
// Usage: node node_client.js HOST:PORT EXPECTED_BEAT_INTERVAL_MS
// Prints "node client: all checks passed" and exits 0, or names the failed check and exits 1.
'use strict';
const { NacosNamingClient } = require('nacos');

const [addr, expectedInterval] = [process.argv[2], Number(process.argv[3])];
const logger = {
  info() {}, debug() {}, warn() {},
  error(e) { console.error('client error:', (e && e.message) || e); },
};

function check(cond, what) {
  if (!cond) {
    console.error('FAILED: ' + what);
    process.exit(1);
  }
}

const ports = hosts => hosts.map(h => h.port).sort((a, b) => a - b);

(async () => {
  const client = new NacosNamingClient({ logger, serverList: addr, namespace: 'public' });
  await client.ready();

  await client.registerInstance('node-demo', { ip: '127.0.0.1', port: 8080, metadata: { k: 'v' } });
  await client.registerInstance('node-demo', { ip: '127.0.0.1', port: 8081, clusterName: 'c1' }, 'G1');
  await client.registerInstance('node-demo', { ip: '127.0.0.1', port: 8082, weight: 3 });

  // A beat exactly as the client's beat reactor sends it (with the body).
  const interval = await client._serverProxy.sendBeat({
    serviceName: 'DEFAULT_GROUP@@node-demo', ip: '127.0.0.1', port: 8080,
    cluster: 'DEFAULT', weight: 1, metadata: { k: 'v' }, scheduled: true,
  });
  check(interval === expectedInterval, `beat answers clientBeatInterval ${expectedInterval}, got ${interval}`);

  const all = await client.getAllInstances('node-demo', 'DEFAULT_GROUP', '', false);
  check(JSON.stringify(ports(all)) === '[8080,8082]', 'list shows the instances: ' + JSON.stringify(all));
  const first = all.find(h => h.port === 8080);
  check(first.metadata.k === 'v' && first.healthy === true && first.enabled === true, 'host fields: ' + JSON.stringify(first));
  check(all.find(h => h.port === 8082).weight === 3, 'weight: ' + JSON.stringify(all));
  const g1 = await client.getAllInstances('node-demo', 'G1', 'c1', false);
  check(JSON.stringify(ports(g1)) === '[8081]', 'group G1 cluster c1: ' + JSON.stringify(g1));
  const healthy = await client.selectInstances('node-demo', 'DEFAULT_GROUP', '', true, false);
  check(JSON.stringify(ports(healthy)) === '[8080,8082]', 'selectInstances(healthy): ' + JSON.stringify(healthy));

  check((await client.getServerStatus()) === 'UP', 'getServerStatus is UP');

  const services = await client._serverProxy.getServiceList(1, 10, 'DEFAULT_GROUP');
  check(services.count >= 1 && services.data.includes('node-demo'), 'getServiceList: ' + JSON.stringify(services));
  const g1Services = await client._serverProxy.getServiceList(1, 10, 'G1');
  check(JSON.stringify(g1Services.data) === '["node-demo"]', 'getServiceList(G1): ' + JSON.stringify(g1Services));

  await client.deregisterInstance('node-demo', { ip: '127.0.0.1', port: 8080 });
  const after = await client.getAllInstances('node-demo', 'DEFAULT_GROUP', '', false);
  check(JSON.stringify(ports(after)) === '[8082]', 'deregistered instance is gone: ' + JSON.stringify(after));
  // The client ignores an empty list (it keeps its last one), so the final
  // deregistrations are checked on the server side by the Rust test.
  await client.deregisterInstance('node-demo', { ip: '127.0.0.1', port: 8082 });
  await client.deregisterInstance('node-demo', { ip: '127.0.0.1', port: 8081, clusterName: 'c1' }, 'G1');

  client.close();
  console.log('node client: all checks passed');
  process.exit(0);
})().catch(e => {
  console.error('FAILED: ' + ((e && e.stack) || e));
  process.exit(1);
});
