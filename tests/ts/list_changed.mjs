// Connects the official TypeScript MCP client to /mcp of a real `strictcall federate` and waits
// for `notifications/tools/list_changed` on the GET stream the client opens after initialize.
// Prints "connected", then one JSON document once told (or after 30 s): whether it was told,
// and the tools it lists then. Run by tests/test_mcp_change_streams.py:
//
//   node list_changed.mjs <url> <token>
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";

const [url, token] = process.argv.slice(2);
const client = new Client({ name: "strictcall-ts-list-changed", version: "1.0.0" });
let told;
const toldOnce = new Promise((resolve) => {
  told = resolve;
});
client.setNotificationHandler(ToolListChangedNotificationSchema, () => told(true));
await client.connect(
  new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  }),
);
console.log("connected");
const timeout = new Promise((resolve) => setTimeout(() => resolve(false), 30_000));
const report = {
  capabilities: client.getServerCapabilities(),
  told: await Promise.race([toldOnce, timeout]),
};
report.tools = (await client.listTools()).tools.map((tool) => tool.name);
console.log(JSON.stringify(report));
await client.close();
process.exit(0);
