// The real Node client nacos@2.6.3 subscribes and must see every change
// through UDP push well before its 10 s poll would have shown it.
// Usage: node node_subscribe.js HOST:PORT
// Prints "node subscribe: all checks passed" and exits 0, or exits 1 naming the failed check.
'use strict';
const { NacosNamingClient } = require('nacos');

const addr = process.argv[2];
const logger = {
  info() {}, debug() {}, warn() {},
  error(e) { console.error('client error:', (e && e.message) || e); },
};
const ports = hosts => JSON.stringify(hosts.map(h => h.port).sort((a, b) => a - b));

(async () => {
  const watcher = new NacosNamingClient({ logger, serverList: addr, namespace: 'public' });
  const writer = new NacosNamingClient({ logger, serverList: addr, namespace: 'public' });
  await watcher.ready();
  await writer.ready();

  const seen = [];
  let wake = () => {};
  watcher.subscribe({ serviceName: 'node-push' }, hosts => {
    seen.push(ports(hosts));
    wake();
  });

  // Waits until the callback has delivered `want`, at most `ms`.
  async function expect(want, ms, what) {
    const deadline = Date.now() + ms;
    while (seen[seen.length - 1] !== want) {
      const left = deadline - Date.now();
      if (left <= 0) {
        console.error(`FAILED: ${what}: wanted ${want} within ${ms} ms, callback saw ${JSON.stringify(seen)}`);
        process.exit(1);
      }
      await new Promise(resolve => { wake = resolve; setTimeout(resolve, Math.min(left, 50)); });
    }
  }

  await writer.registerInstance('node-push', { ip: '127.0.0.1', port: 8080 });
  // The first callback may come from the subscription's own first query.
  await expect('[8080]', 8000, 'first registration');
  // From here on the subscriber is known to the server: changes must arrive by push,
  // far sooner than the 10 s poll interval the server tells subscribed clients.
  await writer.registerInstance('node-push', { ip: '127.0.0.1', port: 8081 });
  await expect('[8080,8081]', 3000, 'second registration pushed');
  await writer.deregisterInstance('node-push', { ip: '127.0.0.1', port: 8081 });
  await expect('[8080]', 3000, 'deregistration pushed');
  await writer.registerInstance('node-push', { ip: '127.0.0.1', port: 8082, weight: 2 });
  await expect('[8080,8082]', 3000, 'third registration pushed');

  // Give the ack of the last push time to reach the server before we exit.
  await new Promise(resolve => setTimeout(resolve, 200));
  watcher.close();
  writer.close();
  console.log('node subscribe: all checks passed');
  process.exit(0);
})().catch(e => {
  console.error('FAILED: ' + ((e && e.stack) || e));
  process.exit(1);
});
