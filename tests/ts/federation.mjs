// Drives `strictcall federate` on stdio with the official TypeScript MCP client and prints one
// JSON document of what the client handed back: the listing, a call, a rug pull and the calls
// after it until one is held back. Run by tests/test_federation.py:
//
//   node federation.mjs <command> [args...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "strictcall-ts-federation", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));

const report = { names: (await client.listTools()).tools.map((tool) => tool.name) };
report.added = await client.callTool({ name: "notes_add", arguments: { a: 2, b: 3 } });
report.pulled = await client.callTool({ name: "notes_rug_pull", arguments: {} });
const deadline = Date.now() + 30_000;
for (;;) {
  const held = await client.callTool({ name: "notes_add", arguments: { a: 1, b: 1 } });
  if (held.isError || Date.now() > deadline) {
    report.held = held;
    break;
  }
  await new Promise((resolve) => setTimeout(resolve, 50));
}
report.listedAdd = (await client.listTools()).tools.find((tool) => tool.name === "notes_add");
await client.close();
console.log(JSON.stringify(report));
