import { createConnection, createServer, type Server, type Socket } from "node:net"
import * as Command from "@effect/cli/Command"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { Effect } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { commandSpec } from "../packages/cli/src/cli.js"
import { databaseOptions } from "../packages/cli/src/options.js"
import { argumentProblem, type CommandSpec } from "../packages/cli/src/spec.js"
import { type DatabaseOptions, storeConnection } from "../packages/cli/src/store.js"
import { jsonOf, runCli } from "./support/cli/run.js"
import { freshPrefix, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// `--no-prepared-statements`: the store opened with `prepareStatements: false`, for a pooler that keeps no
// prepared statements per client. The Postgres cases spawn the built CLI: `npm run build` first.

/** The shared store options as the CLI parses them from `args`. */
const parsed = (args: ReadonlyArray<string>): Promise<DatabaseOptions> => {
  let seen: DatabaseOptions | undefined
  const probe = Command.make("probe", databaseOptions, (options) => Effect.sync(() => void (seen = options)))
  const run = Command.run(probe, { name: "probe", version: "0" })(["node", "probe", ...args])
  return Effect.runPromise(Effect.provide(run, NodeContext.layer)).then(() => seen!)
}

describe("--no-prepared-statements", () => {
  it("every command that opens a store takes it, simulate too", () => {
    const all = (spec: CommandSpec): ReadonlyArray<CommandSpec> => [spec, ...spec.children.flatMap(all)]
    const opening = all(commandSpec()).filter((spec) => spec.flags.some((flag) => flag.name === "database"))
    expect(opening.map((spec) => spec.path.at(-1))).toContain("simulate")
    for (const spec of opening) {
      expect(spec.flags.find((flag) => flag.name === "no-prepared-statements"), spec.path.join(" ")).toMatchObject({ kind: "bool" })
    }
    expect(argumentProblem(commandSpec(), ["status", "--no-prepared-statements", "-d", "x.sqlite"])).toBeUndefined()
    expect(argumentProblem(commandSpec(), ["simulate", "--no-prepared-statements"])).toBeUndefined()
  })

  it("is parsed and reaches the store's open options as prepareStatements: false; without it the default stands", async () => {
    const off = await parsed(["--database", "postgres://ops@db/store", "--no-prepared-statements"])
    expect(off.noPreparedStatements).toBe(true)
    expect(storeConnection(off, true, 30_000)).toMatchObject({ url: "postgres://ops@db/store", readOnly: true, prepareStatements: false })
    expect(storeConnection(off, false, 30_000)).toMatchObject({ readOnly: false, prepareStatements: false })
    const on = await parsed(["--database", "postgres://ops@db/store"])
    expect(on.noPreparedStatements).toBe(false)
    expect(storeConnection(on, false, 30_000)).not.toHaveProperty("prepareStatements")
  })
})

/**
 * A TCP proxy in front of the Postgres server that reads what clients send
 * and counts the Parse messages that name a statement (a prepared statement
 * kept on the server's session) and those that do not.
 */
const startParseWatch = (target: { readonly host: string; readonly port: number }) =>
  new Promise<{ readonly port: number; readonly named: () => number; readonly unnamed: () => number; close(): Promise<void> }>(
    (resolve) => {
      let named = 0
      let unnamed = 0
      const sockets = new Set<Socket>()
      const server: Server = createServer((client) => {
        const upstream = createConnection(target)
        sockets.add(client).add(upstream)
        let pending = Buffer.alloc(0)
        let started = false
        client.on("data", (chunk: Buffer) => {
          upstream.write(chunk)
          pending = Buffer.concat([pending, chunk])
          for (;;) {
            // The startup packet (and an SSL request before it) has no type byte.
            const header = started ? 5 : 4
            if (pending.length < header) break
            const length = started ? pending.readInt32BE(1) + 1 : pending.readInt32BE(0)
            if (pending.length < length) break
            if (!started) {
              started = pending.readInt32BE(4) !== 80877103
            } else if (pending[0] === 0x50) {
              if (pending[5] === 0) unnamed++
              else named++
            }
            pending = pending.subarray(length)
          }
        })
        upstream.on("data", (chunk: Buffer) => client.write(chunk))
        const closeBoth = () => {
          client.destroy()
          upstream.destroy()
        }
        client.on("close", closeBoth).on("error", closeBoth)
        upstream.on("close", closeBoth).on("error", closeBoth)
      })
      server.listen(0, "127.0.0.1", () =>
        resolve({
          port: (server.address() as { port: number }).port,
          named: () => named,
          unnamed: () => unnamed,
          close: () => {
            for (const socket of sockets) socket.destroy()
            return new Promise<void>((done) => server.close(() => done()))
          }
        }))
    }
  )

describe.skipIf(!pgAvailable)("--no-prepared-statements on Postgres, as the server sees it", { timeout: 600_000 }, () => {
  let database: URL
  let watch: Awaited<ReturnType<typeof startParseWatch>>
  beforeAll(async () => {
    database = new URL(await pgDatabaseForFile())
    watch = await startParseWatch({ host: database.hostname, port: Number(database.port || 5432) })
  })
  afterAll(() => watch?.close())

  /** The database's URL through the proxy. */
  const watched = () => {
    const url = new URL(database)
    url.hostname = "127.0.0.1"
    url.port = String(watch.port)
    return url.toString()
  }
  /** What `args` sent through the proxy: named and unnamed Parse messages. */
  const sent = async (args: ReadonlyArray<string>) => {
    const before = { named: watch.named(), unnamed: watch.unnamed() }
    const run = await runCli(args)
    return { run, named: watch.named() - before.named, unnamed: watch.unnamed() - before.unnamed }
  }
  const simulate = ["simulate", "--operations", "8", "--runners", "2", "--duration", "5s"]

  it("simulate's stores name no statement with it, and do without it", async () => {
    const off = await sent([...simulate, "--seed", "11", "--no-prepared-statements", "--database", watched()])
    expect(off.run.code, off.run.stderr).toBe(0)
    expect(off.run.stdout).toMatch(/All invariants hold/)
    expect(off.unnamed).toBeGreaterThan(0)
    expect(off.named).toBe(0)
    const on = await sent([...simulate, "--seed", "12", "--database", watched()])
    expect(on.run.code, on.run.stderr).toBe(0)
    expect(on.named).toBeGreaterThan(0)
  })

  it("migrate, status and an action run with it, naming no statement", async () => {
    const store = ["--database", watched(), "--table-prefix", freshPrefix(), "--no-prepared-statements"]
    const migrated = await sent(["migrate", "--json", ...store])
    expect(jsonOf<{ applied: Array<number> }>(migrated.run).applied.length).toBeGreaterThan(0)
    const status = await sent(["status", "--json", ...store])
    expect(jsonOf<{ operations: Record<string, number> }>(status.run).operations).toMatchObject({ attempted: 0 })
    const collect = await sent(["collect", "--json", ...store])
    expect(collect.run.code, collect.run.stderr).toBe(0)
    for (const run of [migrated, status, collect]) expect(run.named).toBe(0)
  })
})
