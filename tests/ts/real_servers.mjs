// Drives MCP servers with the official TypeScript MCP client (@modelcontextprotocol/sdk): for each
// session of a plan, connects (stdio or Streamable HTTP), lists the tools and makes the plan's
// calls in order, and prints one JSON document of what the client handed back. Run by
// tests/test_real_servers_typescript.py, which compares the real servers called directly with
// the same servers through `strictcall federate`:
//
//   node real_servers.mjs < plan.json
//
// The plan: {"timeout_ms": N, "groups": [[session, ...], ...]}, each session {"name": ...,
// "stdio": {"command", "args", "env"} | "url": ..., "token": ... (optional), "calls": [[tool,
// arguments, raw], ...]}, raw (optional) true to send that tools/call as it is, past the
// client's own checks of the call and of its result (such as its refusal to call a tool that
// requires tasks). The groups run side by side, the sessions of each in order.
// Each session's report: the protocol version the server answered the initialize with, its
// serverInfo name, the listed tools (one page: the client caches outputSchema validators per
// listing), the next cursor if any, and per call the result as handed back or, where the client
// threw, {"client threw": <the error's code, or its class when it has none>}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  McpError,
} from "@modelcontextprotocol/sdk/types.js";

async function readPlan() {
  const chunks = [];
  for await (const chunk of process.stdin) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

function transportFor(session) {
  if (session.stdio) {
    const { command, args, env } = session.stdio;
    return new StdioClientTransport({ command, args, env, stderr: "ignore" });
  }
  const headers = session.token ? { Authorization: `Bearer ${session.token}` } : {};
  return new StreamableHTTPClientTransport(new URL(session.url), { requestInit: { headers } });
}

// A client offering what strictcall offers its upstreams (sampling, elicitation, roots):
// servers such as server-everything list the tools that need them only then. None is asked.
function newClient() {
  const client = new Client(
    { name: "strictcall-ts-real-servers", version: "1.0.0" },
    {
      capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: { listChanged: true } },
    },
  );
  const notOffered = () => {
    throw new McpError(ErrorCode.InvalidRequest, "not offered here");
  };
  client.setRequestHandler(CreateMessageRequestSchema, notOffered);
  client.setRequestHandler(ElicitRequestSchema, notOffered);
  client.setRequestHandler(ListRootsRequestSchema, notOffered);
  return client;
}

async function outcome(call) {
  try {
    return await call();
  } catch (error) {
    return { "client threw": error?.code ?? error?.constructor?.name ?? "unknown" };
  }
}

async function runSession(session, timeout) {
  const transport = transportFor(session);
  const report = { version: null };
  // Protocol.connect keeps a handler set before it and calls it first: the initialize
  // result's protocolVersion, as the server wrote it (the client has no getter of its own).
  transport.onmessage = (message) => {
    if (report.version === null && typeof message?.result?.protocolVersion === "string") {
      report.version = message.result.protocolVersion;
    }
  };
  const client = newClient();
  await client.connect(transport, { timeout });
  try {
    report.server = client.getServerVersion()?.name ?? null;
    const listed = await client.listTools(undefined, { timeout });
    report.tools = listed.tools;
    report.nextCursor = listed.nextCursor ?? null;
    report.answers = [];
    for (const [name, args, raw] of session.calls) {
      const params = { name, arguments: args };
      report.answers.push(
        await outcome(() =>
          raw
            ? client.request({ method: "tools/call", params }, CallToolResultSchema, { timeout })
            : client.callTool(params, undefined, { timeout }),
        ),
      );
    }
  } finally {
    await client.close();
  }
  return report;
}

// The groups run side by side, the sessions of a group one after another.
const plan = await readPlan();
const reports = {};
await Promise.all(
  plan.groups.map(async (group) => {
    for (const session of group) {
      reports[session.name] = await runSession(session, plan.timeout_ms);
    }
  }),
);
process.stdout.write(JSON.stringify({ sessions: reports }) + "\n");
