import { createServer, type Server, type Socket } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { commandSpec, parserMessage } from "../packages/cli/src/cli.js"
import { argumentProblem, helpText } from "../packages/cli/src/spec.js"
import { failureOf, runCli } from "./support/cli/run.js"
import { freshSqlitePath } from "./support/databases.js"

// The spawned cases need `npm run build` first (they run dist); the rest run the source.

const root = commandSpec()
const problem = (...args: ReadonlyArray<string>) => argumentProblem(root, args)

describe("argument errors name the real problem", () => {
  it.each([
    [["simulate", "--seed"], "--seed needs a value"],
    [["simulate", "--seed", "--runners", "2"], "--seed needs a value"],
    [["status", "-d", "a.sqlite", "--database", "b.sqlite"], "--database is given twice; give it once"],
    [["operations", "--limit", "abc"], '--limit must be an integer, got "abc"'],
    [["operations", "--limit=ten"], '--limit must be an integer, got "ten"'],
    [["operations", "--state", "lost"], '--state must be one of attempted, committed, dead, reconcile_only; got "lost"'],
    [["operations", "--state"], "--state needs a value: one of attempted, committed, dead, reconcile_only"],
    [["status", "--bogus"], "unknown option --bogus for connector-store status"],
    [["simulate", "--seeed", "1"], "unknown option --seeed for connector-store simulate (did you mean --seed?)"],
    [["status", "extra"], 'unexpected argument "extra": connector-store status takes only options (see connector-store status --help)'],
    [["status", "--json=yes"], '--json takes no value (got "yes")'],
    [["frobnicate"], 'unknown command "frobnicate" for connector-store: use one of migrate, status, operations, watches, show, settle, retry, rearm, collect, relist, sync, limits, simulate, dashboard, end-failover-doubt'],
    [["stauts"], 'unknown command "stauts" for connector-store (did you mean status?): use one of migrate, status, operations, watches, show, settle, retry, rearm, collect, relist, sync, limits, simulate, dashboard, end-failover-doubt'],
    [["show"], "show needs a command: one of operation, watch (see connector-store show --help)"],
    [["retry", "--caller", "c"], "retry needs --operation (see connector-store retry --help)"],
    [["settle", "--outcome", "dead"], "settle needs --caller, --operation (see connector-store settle --help)"],
    [["sync", "release", "--connector", "c"], "sync release needs --owner (see connector-store sync release --help)"]
  ] as const)("%j", (args, expected) => {
    expect(problem(...args)).toBe(expected)
  })

  it("accepts what the parser accepts: repeated repeatable flags, values that look negative, aliases, --flag=value", () => {
    expect(problem("operations", "--state", "dead", "--state", "reconcile_only", "-d", "x.sqlite")).toBeUndefined()
    expect(problem("simulate", "--runners", "-1", "--file", "x.sqlite")).toBeUndefined()
    expect(problem("operations", "--limit=10", "--database=x.sqlite", "--json")).toBeUndefined()
  })

  it("the parser's own messages become one line in plain words", () => {
    expect(parserMessage("\x1b[1m'abc' is not a integer\x1b[0m\n\n")).toBe("'abc' is not an integer")
    expect(parserMessage("Expected to find option: '--database'\n")).toBe("--database is required (or set CONNECTOR_STORE_DATABASE)")
    expect(parserMessage("Expected to find option: '--caller'")).toBe("--caller is required")
  })
})

describe("help", () => {
  const helpOf = (...path: ReadonlyArray<string>) => {
    let spec = root
    for (const name of path) spec = spec.children.find((child) => child.path[child.path.length - 1] === name)!
    return helpText(spec)
  }
  const section = (text: string, name: string) => {
    const start = text.indexOf(`\n${name}:\n`)
    if (start < 0) return ""
    const rest = text.slice(start + name.length + 3)
    return rest.slice(0, rest.search(/\n\n|$/))
  }

  it("required flags are shown required and optional ones optional", () => {
    const settle = helpOf("settle")
    expect(section(settle, "Required")).toMatch(/^ {2}--caller <text>/m)
    expect(section(settle, "Required")).toMatch(/^ {2}--operation <text>/m)
    expect(section(settle, "Options")).not.toMatch(/--caller/)
    expect(settle).toMatch(/^Usage: connector-store settle --caller <text> --operation <text> --outcome committed\|dead \[options\]$/m)
    const operations = helpOf("operations")
    expect(section(operations, "Required")).toBe("")
    expect(section(operations, "Options")).toMatch(/^ {2}--state attempted\|committed\|dead\|reconcile_only\n +Only operations in this state \(repeatable\)$/m)
    expect(section(helpOf("watches"), "Options")).toMatch(/^ {2}--status pending_verification\|verified\|repair_failed/m)
    expect(section(operations, "Options")).toMatch(/^ {2}--connect-timeout <n> .*\(default 10\)$/m)
    // show operation names its operation by key or by node key: neither is required.
    expect(section(helpOf("show", "operation"), "Required")).toBe("")
  })

  it("every command's help is short enough to read and has no colour codes", () => {
    const all = (spec: typeof root): Array<typeof root> => [spec, ...spec.children.flatMap(all)]
    for (const spec of all(root)) {
      const text = helpText(spec)
      expect(text, spec.path.join(" ")).not.toMatch(/\x1b/)
      expect(text.split("\n").length, spec.path.join(" ")).toBeLessThanOrEqual(40)
    }
  })
})

describe("the built CLI: one line, the prefix, exit 1; plain help", { timeout: 600_000 }, () => {
  it("each bad argument is one line on stderr with the prefix and exit code 1, and creates nothing", async () => {
    const file = freshSqlitePath()
    for (const [args, expected] of [
      [["simulate", "--seed"], "connector-store: --seed needs a value"],
      [["status", "-d", file, "-d", file], "connector-store: --database is given twice; give it once"],
      [["operations", "--limit", "abc", "-d", file], 'connector-store: --limit must be an integer, got "abc"'],
      [["status"], "connector-store: --database is required (or set CONNECTOR_STORE_DATABASE)"],
      [["operations", "--bogus", "-d", file], "connector-store: unknown option --bogus for connector-store operations"]
    ] as const) {
      expect(failureOf(await runCli(args)), args.join(" ")).toEqual({ code: 1, lines: [expected] })
    }
  })

  it("--help is plain text when stdout is not a terminal, NO_COLOR or not", async () => {
    for (const env of [{ NO_COLOR: undefined }, { NO_COLOR: "1" }]) {
      for (const command of [[], ["settle"], ["operations"], ["sync", "release"]]) {
        const help = await runCli([...command, "--help"], env)
        expect(help.code, command.join(" ")).toBe(0)
        expect(help.stdout, command.join(" ")).toMatch(/^Usage: connector-store/m)
        expect(help.stdout, command.join(" ")).not.toMatch(/\x1b/)
      }
    }
  })
})

describe("a Postgres server that accepts and never answers", { timeout: 120_000 }, () => {
  let silent: Server
  let port = 0
  const sockets: Array<Socket> = []
  beforeAll(async () => {
    silent = createServer((socket) => void sockets.push(socket))
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve))
    port = (silent.address() as { port: number }).port
  })
  afterAll(() => {
    for (const socket of sockets) socket.destroy()
    return new Promise<void>((resolve) => silent.close(() => resolve()))
  })

  it("the library fails the open as unreachable, after its connect timeout", async () => {
    const { openConnectorStore } = await import("@connector-store/sql-adapter")
    const { CONNECT_TIMEOUT_MS } = await import("../packages/sql-adapter/src/PgConnection.js")
    expect(CONNECT_TIMEOUT_MS).toBe(10_000)
    const failure = await openConnectorStore({ url: `postgres://ops@127.0.0.1:${port}/store` }).then(
      () => undefined,
      (error: unknown) => error
    )
    expect(failure).toMatchObject({ _tag: "PersistenceError", reason: "unreachable", method: "openConnectorStore" })
    expect(String((failure as Error).message)).toMatch(/did not answer within 10s/)
  })

  it("the CLI with its default timeout reports it as unreachable, in one line", async () => {
    const run = failureOf(await runCli(["status", "--database", `postgres://ops:secret@127.0.0.1:${port}/store`]))
    expect(run.code).toBe(1)
    expect(run.lines).toHaveLength(1)
    expect(run.lines[0]).toMatch(new RegExp(`^connector-store: cannot open database postgres://ops:\\*\\*\\*@127\\.0\\.0\\.1:${port}/store: .*unreachable`))
  })
})
