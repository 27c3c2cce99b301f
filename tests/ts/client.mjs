// Drives strictcall with the official TypeScript MCP client (@modelcontextprotocol/sdk), as
// most MCP hosts embed it, and prints one JSON document of what the client handed back.
// Run by tests/test_mcp_typescript.py:
//
//   node client.mjs stdio <other-note-id> <command> [args...]
//   node client.mjs http <other-note-id> <url> <token>
//
// A call the client throws on is reported as {"threw": <message>}: the pytest test asserts
// that none does, and checks every answer's code against strictcall.errors.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const [mode, otherNote, ...rest] = process.argv.slice(2);

function transportFor() {
  if (mode === "stdio") {
    const [command, ...args] = rest;
    return new StdioClientTransport({ command, args, stderr: "inherit" });
  }
  if (mode === "http") {
    const [url, token] = rest;
    return new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    });
  }
  throw new Error(`unknown mode ${mode}`);
}

// What the client handed back for one call: the result as is, or what it threw.
async function outcome(call) {
  try {
    return { result: await call() };
  } catch (error) {
    return { threw: String(error && error.message ? error.message : error) };
  }
}

const client = new Client({ name: "strictcall-ts-test", version: "1.0.0" });
await client.connect(transportFor());
const report = { server: client.getServerVersion()?.name ?? null };

const listed = await client.listTools(); // caches every tool's outputSchema validator
report.tools = listed.tools.map((tool) => ({
  name: tool.name,
  inputType: tool.inputSchema.type,
  outputType: tool.outputSchema ? tool.outputSchema.type : null,
}));

const call = (name, args) => outcome(() => client.callTool({ name, arguments: args }));
const raw = (params) =>
  outcome(() => client.request({ method: "tools/call", params }, CallToolResultSchema));

report.count = await call("count_notes", {});
report.listEmpty = await call("list_notes", {});
report.created = await call("create_note", { text: "" });
const note = report.created.result?.structuredContent;
report.read = await call("read_note", { note_id: note?.note_id });
report.listOne = await call("list_notes", {});
report.deleted = await call("delete_note", { note_id: note?.note_id });
report.gone = await call("read_note", { note_id: note?.note_id });
report.unknownTool = await call("drop_tables", {});
report.badArguments = await call("create_note", { text: "x", admin: true });
report.wrongType = await call("read_note", { note_id: 7 });
report.othersNote = await call("read_note", { note_id: otherNote });
report.othersDelete = await call("delete_note", { note_id: otherNote });
report.noName = await raw({ arguments: {} });
report.stringArguments = await raw({ name: "read_note", arguments: "oops" });
report.extraMember = await raw({ name: "count_notes", arguments: {}, admin: true });

await client.close();
process.stdout.write(JSON.stringify(report) + "\n");
