// Connects the official TypeScript MCP client to /mcp of a real `strictcall proxy` or
// `federate` in front of server-everything, starts its updates (the `tool` given), subscribes
// to `first` until told of it on the GET stream the client opens after initialize, unsubscribes,
// then subscribes to `second` until told of it. Prints the server's capabilities, then one JSON
// document: the URIs told in order and where the unsubscribe was answered (or an error after
// 30 s). Run by tests/test_mcp_resource_subscriptions.py:
//
//   node resource_updates.mjs <url> <token> <tool> <first> <second>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ResourceUpdatedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token, tool, first, second] = process.argv.slice(2);
const client = new Client({ name: "strictcall-ts-resource-updates", version: "1.0.0" });
const heard = [];
let wake = () => {};
client.setNotificationHandler(ResourceUpdatedNotificationSchema, (notification) => {
  heard.push(notification.params.uri);
  wake();
});
const deadline = Date.now() + 30_000;

async function until(uri, after) {
  while (!heard.slice(after).includes(uri)) {
    if (Date.now() > deadline) throw new Error(`not told of ${uri} in time`);
    await new Promise((resolve) => {
      wake = resolve;
      setTimeout(resolve, 250);
    });
  }
}

await client.connect(
  new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }),
);
console.log(JSON.stringify(client.getServerCapabilities()));
await client.callTool({ name: tool, arguments: {} });
await client.subscribeResource({ uri: first });
await until(first, 0);
await client.unsubscribeResource({ uri: first });
const held = heard.length;
// the upstream's next round tells `first` before `second`, had it still been subscribed
await client.subscribeResource({ uri: second });
await until(second, held);
console.log(JSON.stringify({ heard, held }));
await client.close();
process.exit(0);
