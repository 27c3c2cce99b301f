// Drives `strictcall federate` on stdio with the official TypeScript MCP client and prints one
// JSON document of the upstreams' resources and prompts as the client handed them back: the
// listings, a read, a prompt, and the error of a read of a URI no upstream listed. Run by
// tests/test_federation_content.py:
//
//   node federation_content.mjs <command> [args...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [command, ...args] = process.argv.slice(2);
const client = new Client({ name: "strictcall-ts-federation-content", version: "1.0.0" });
await client.connect(new StdioClientTransport({ command, args, stderr: "inherit" }));

const report = {
  capabilities: client.getServerCapabilities(),
  resources: (await client.listResources()).resources.map((r) => [r.uri, r.name]),
  templates: (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
  prompts: (await client.listPrompts()).prompts.map((p) => p.name),
};
report.read = await client.readResource({ uri: "notes://n1" });
report.prompt = await client.getPrompt({ name: "sdk_summarize", arguments: { note_id: "n1" } });
try {
  await client.readResource({ uri: "notes-unlisted://x" });
  report.unlisted = null;
} catch (error) {
  report.unlisted = { code: error.code, data: error.data };
}
await client.close();
console.log(JSON.stringify(report));
