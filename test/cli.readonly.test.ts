import { createHash } from "node:crypto"
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, statSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import pg from "pg"
import { describe, expect, it } from "vitest"
import { failureOf, jsonOf, runCli, runCliHere } from "./support/cli/run.js"
import { type CliDatabase, dbArgs, openForCheck, seedStore } from "./support/cli/seed.js"
import { freshPrefix, freshSqlitePath, pgAvailable, pgDatabaseForFile } from "./support/databases.js"

// The commands run in this process (`runCliHere`); the runs as another user spawn the built CLI (`npm run build` first).

/** Every inspection command, with what it needs to name a row. */
const INSPECTIONS: ReadonlyArray<ReadonlyArray<string>> = [
  ["status"],
  ["status", "--json"],
  ["operations"],
  ["operations", "--json", "--in-doubt"],
  ["watches", "--due"],
  ["show", "operation", "--caller", "did:caller:1", "--operation", "unknown"],
  ["show", "watch", "--document", "doc-broken"],
  ["relist", "list"],
  ["relist", "given-up", "--owner", "did:owner:1", "--connector", "gcal", "--model", "Event", "--account", "acct-1"],
  ["sync", "list"]
]

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex")

/** A fingerprint of every row of every table under `prefix`, and the tables' names. */
const pgFingerprint = async (url: string, prefix: string): Promise<string> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const tables = (await client.query<{ name: string }>(
      "SELECT table_name AS name FROM information_schema.tables WHERE table_schema = current_schema() AND starts_with(table_name, $1) ORDER BY 1",
      [prefix]
    )).rows.map((row) => row.name)
    const parts: Array<string> = []
    for (const table of tables) {
      const { rows } = await client.query<{ digest: string | null }>(`SELECT md5(string_agg(t::text, '|' ORDER BY t::text)) AS digest FROM ${table} t`)
      parts.push(`${table}:${rows[0]?.digest ?? "empty"}`)
    }
    return parts.join(",")
  } finally {
    await client.end()
  }
}

const pgTablesWithPrefix = async (url: string, prefix: string): Promise<number> => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const { rows } = await client.query<{ n: string }>(
      "SELECT COUNT(*) AS n FROM information_schema.tables WHERE starts_with(table_name, $1)",
      [prefix]
    )
    return Number(rows[0]?.n)
  } finally {
    await client.end()
  }
}

describe("CLI inspection never writes (SQLite)", { timeout: 600_000 }, () => {
  it("the database file is byte for byte the same after every inspection command", async () => {
    const db: CliDatabase = { url: freshSqlitePath() }
    await seedStore(db)
    const before = sha256(db.url)
    for (const command of INSPECTIONS) {
      const run = await runCliHere([...command, ...dbArgs(db)])
      expect(run.code, `${command.join(" ")}: ${run.stderr}`).toBe(0)
      expect(sha256(db.url), command.join(" ")).toBe(before)
    }
    // The checksum does see a write: an action changes the file.
    const acted = await runCliHere(["settle", "--caller", "did:caller:1", "--operation", "unknown", "--outcome", "dead", ...dbArgs(db)])
    expect(acted.code, acted.stderr).toBe(0)
    expect(sha256(db.url)).not.toBe(before)
  })

  it("a missing file is 'no such database', for inspections and actions alike, and no file is created", async () => {
    const path = freshSqlitePath()
    for (const command of [...INSPECTIONS, ["retry", "--caller", "c", "--operation", "o"], ["sync", "release", "--connector", "c", "--owner", "o"]]) {
      expect(failureOf(await runCliHere([...command, "--database", path])), command.join(" ")).toEqual({
        code: 1,
        lines: [`connector-store: no such database: ${path}`]
      })
    }
    expect(existsSync(path)).toBe(false)
    expect(readdirSync(dirname(path)).filter((name) => name.startsWith("file:"))).toEqual([])
  })

  it("an unknown table prefix is named, and neither an inspection nor an action adds a table", async () => {
    const db: CliDatabase = { url: freshSqlitePath() }
    await seedStore(db)
    const before = sha256(db.url)
    for (const command of [["status"], ["operations"], ["collect", "--before", "7d"]]) {
      expect(failureOf(await runCliHere([...command, "--database", db.url, "--table-prefix", "other_"])), command.join(" ")).toEqual({
        code: 1,
        lines: [
          `connector-store: no connector-store tables with prefix other_ in ${db.url} (check --table-prefix; connector-store migrate creates them)`
        ]
      })
    }
    expect(sha256(db.url)).toBe(before)
  })

  it("an older schema names the missing migration; migrate applies it and inspection works again", async () => {
    const db: CliDatabase = { url: freshSqlitePath() }
    await seedStore(db)
    const { default: Sqlite } = await import("better-sqlite3")
    const raw = new Sqlite(db.url)
    raw.prepare("DELETE FROM kubun_connector_schema_migrations WHERE id = 7").run()
    raw.close()
    const before = sha256(db.url)
    for (const command of [["status"], ["retry", "--caller", "did:caller:1", "--operation", "failed"]]) {
      expect(failureOf(await runCliHere([...command, ...dbArgs(db)])), command.join(" ")).toEqual({
        code: 1,
        lines: [`connector-store: ${db.url}: the schema lacks migration 7 (retention_partition_indexes); connector-store migrate applies it`]
      })
    }
    expect(sha256(db.url)).toBe(before)
    expect((await runCliHere(["migrate", ...dbArgs(db)])).stdout).toMatch(/applied migration 7\n$/)
    expect(jsonOf(await runCliHere(["status", "--json", ...dbArgs(db)])).operations.committed).toBe(2)
  })

  it("a read-only file can be inspected", async () => {
    const db: CliDatabase = { url: freshSqlitePath() }
    await seedStore(db)
    const before = sha256(db.url)
    chmodSync(db.url, 0o444)
    // Root writes any file whatever its mode: the CLI then runs as an unprivileged user, whose folder it may write.
    const asRoot = process.getuid?.() === 0
    if (asRoot) {
      chmodSync(dirname(db.url), 0o777)
      chmodSync(dirname(dirname(db.url)), 0o711)
    }
    const as = asRoot ? { uid: 65534, gid: 65534 } : undefined
    const status = await runCli(["status", "--json", ...dbArgs(db)], {}, as)
    expect(jsonOf(status).operations).toEqual({ attempted: 1, committed: 2, dead: 1, reconcile_only: 1 })
    const listed = await runCli(["operations", "--json", "--state", "dead", ...dbArgs(db)], {}, as)
    expect(jsonOf(listed).operations.map((row: { operationID: string }) => row.operationID)).toEqual(["failed"])
    expect(sha256(db.url)).toBe(before)
  })
})

describe("CLI inspection in a folder the user cannot write (SQLite)", { timeout: 600_000 }, () => {
  // Root writes any folder whatever its mode: the CLI then runs as an unprivileged user.
  const asRoot = process.getuid?.() === 0
  const as = asRoot ? { uid: 65534, gid: 65534 } : undefined

  /** A path in a folder of its own, which `lockFolder` may lock. */
  const ownFolderPath = (name: string): string => {
    const folder = join(dirname(freshSqlitePath()), `${name}-${process.hrtime.bigint()}`)
    mkdirSync(folder)
    return join(folder, "store.sqlite")
  }

  /** Makes `path`'s folder, and the file, read-only to the user the CLI runs as. */
  const lockFolder = (path: string) => {
    chmodSync(path, 0o444)
    chmodSync(dirname(path), 0o555)
    // The folders above it only need to be passable: search permission is added, nothing taken away.
    if (asRoot) for (let up = dirname(dirname(path)); up !== dirname(up); up = dirname(up)) chmodSync(up, statSync(up).mode | 0o011)
  }

  it("a store no connection has open (no -shm file) is inspected, and nothing is created or written", async () => {
    const db: CliDatabase = { url: ownFolderPath("locked") }
    await seedStore(db)
    expect(existsSync(`${db.url}-shm`)).toBe(false)
    const before = sha256(db.url)
    lockFolder(db.url)
    const status = await runCli(["status", "--json", ...dbArgs(db)], {}, as)
    expect(jsonOf(status).operations).toEqual({ attempted: 1, committed: 2, dead: 1, reconcile_only: 1 })
    const listed = await runCli(["operations", "--json", "--state", "dead", ...dbArgs(db)], {}, as)
    expect(jsonOf(listed).operations.map((row: { operationID: string }) => row.operationID)).toEqual(["failed"])
    const shown = await runCli(["show", "operation", "--caller", "did:caller:1", "--operation", "failed", "--json", ...dbArgs(db)], {}, as)
    expect(shown.code, shown.stderr).toBe(0)
    expect(sha256(db.url)).toBe(before)
    // The generation the seeding store kept beside the file, and nothing the inspection made.
    expect(readdirSync(dirname(db.url)).sort()).toEqual(["store.sqlite", "store.sqlite-generation"])
    // An action that writes still cannot.
    expect(failureOf(await runCli(["collect", "--before", "7d", ...dbArgs(db)], {}, as)).code).toBe(1)
    expect(sha256(db.url)).toBe(before)
  })

  it("a log with commits but no -shm file fails naming why, and what to do", async () => {
    const source = freshSqlitePath()
    await seedStore({ url: source })
    // Copied while a store has it open: the log holds commits not yet in the file.
    const store = await openForCheck({ url: source })
    await store.setSyncState("gcal", "did:owner:9", { status: "idle", lastSyncedAt: "t9", entityCount: 9 })
    const db: CliDatabase = { url: ownFolderPath("copy") }
    copyFileSync(source, db.url)
    copyFileSync(`${source}-wal`, `${db.url}-wal`)
    await store.close()
    expect(statSync(`${db.url}-wal`).size).toBeGreaterThan(0)
    lockFolder(db.url)
    const failed = failureOf(await runCli(["status", ...dbArgs(db)], {}, as))
    expect(failed.code).toBe(1)
    expect(failed.lines.join(" ")).toContain(`its folder is not writable, so SQLite cannot create ${db.url}-shm`)
    expect(failed.lines.join(" ")).toContain("open it once with write access")
  })
})

describe("database URLs", { timeout: 600_000 }, () => {
  it("unknown schemes are refused by name, never taken for a file path", async () => {
    const cwd = process.cwd()
    for (const [url, expected] of [
      ["mysql://ops@db/store", 'connector-store: --database: the URL scheme "mysql://" is not supported: give a SQLite file path, a file: URI, or a postgres:// URL'],
      [
        "postgress://ops@db/store",
        'connector-store: --database: the URL scheme "postgress://" is not supported (did you mean postgres://?): give a SQLite file path, a file: URI, or a postgres:// URL'
      ],
      ["sqlite:///var/lib/store.sqlite", "connector-store: --database: a sqlite:// URL is not taken: give the SQLite file's path, or a file: URI (file:///path/to/store.sqlite)"],
      ["file://elsewhere/store.sqlite", 'connector-store: --database: a file: URI names a file on this machine; its authority must be empty or localhost, got "elsewhere"'],
      ["file:store.sqlite?immutable=1", 'connector-store: --database: the file: URI parameter "immutable" is not supported (mode=ro|rw|rwc|memory and cache=private are)']
    ] as const) {
      for (const command of [["status"], ["migrate"]]) {
        expect(failureOf(await runCliHere([...command, "--database", url])), `${command[0]} ${url}`).toEqual({ code: 1, lines: [expected] })
      }
    }
    expect(readdirSync(cwd).filter((name) => /^(mysql|postgress|sqlite|file):/.test(name))).toEqual([])
  })

  it("a file: URI means what SQLite means: the file it names, percent-decoded, with mode=ro read-only", async () => {
    const path = freshSqlitePath()
    const folder = dirname(path)
    // A relative URI is relative to the working directory, as a relative path is.
    const relativeUri = `file:${relative(process.cwd(), path).replace(/\.sqlite$/, "%2Esqlite")}`
    const migrated = await runCliHere(["migrate", "--database", relativeUri])
    expect(migrated.code, migrated.stderr).toBe(0)
    expect(existsSync(path)).toBe(true)
    expect(readdirSync(folder).filter((name) => name.startsWith("file:"))).toEqual([])
    await seedStore({ url: path })
    const before = sha256(path)
    for (const uri of [`file://${path}`, `file://localhost${path}?mode=ro`, `file:${path}?mode=rw`]) {
      const status = await runCliHere(["status", "--json", "--database", uri])
      expect(jsonOf(status).operations.committed, uri).toBe(2)
    }
    expect(sha256(path)).toBe(before)
    // mode=rw: the file must exist.
    const missing = join(folder, "missing.sqlite")
    expect(failureOf(await runCliHere(["migrate", "--database", `file:${missing}?mode=rw`])).code).toBe(1)
    expect(existsSync(missing)).toBe(false)
  })
})

if (pgAvailable) describe("CLI inspection never writes (Postgres)", { timeout: 600_000 }, () => {
  it("no row changes under any inspection command, and an unknown prefix creates no table", async () => {
    const db: CliDatabase = { url: await pgDatabaseForFile(), tablePrefix: freshPrefix() }
    await seedStore(db)
    const before = await pgFingerprint(db.url, db.tablePrefix!)
    expect(before.split(",").length).toBeGreaterThanOrEqual(8)
    for (const command of INSPECTIONS) {
      const run = await runCliHere([...command, ...dbArgs(db)])
      expect(run.code, `${command.join(" ")}: ${run.stderr}`).toBe(0)
    }
    expect(await pgFingerprint(db.url, db.tablePrefix!)).toBe(before)
    const unknown = freshPrefix()
    for (const command of [...INSPECTIONS, ["collect", "--before", "7d"]]) {
      const failed = failureOf(await runCliHere([...command, "--database", db.url, "--table-prefix", unknown]))
      expect(failed, command.join(" ")).toEqual({
        code: 1,
        lines: [
          `connector-store: no connector-store tables with prefix ${unknown} in ${db.url} (check --table-prefix; connector-store migrate creates them)`
        ]
      })
    }
    expect(await pgTablesWithPrefix(db.url, unknown)).toBe(0)
  })
})
