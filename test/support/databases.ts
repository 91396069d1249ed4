import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll, beforeAll, inject } from "vitest"
import { skipPostgresSuites } from "./postgresSuites.js"

/** The Postgres server the tests use (a maintenance database on it). */
export const PG_ADMIN_URL = process.env["CONNECTOR_STORE_PG_URL"] ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** Set in CI: a missing Postgres fails the run instead of skipping its suites. */
export const PG_REQUIRED = process.env["CONNECTOR_STORE_REQUIRE_PG"] === "1"

const probe = async (): Promise<boolean> => {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 3_000 })
  try {
    await client.connect()
    await client.query("SELECT 1")
    return true
  } catch {
    return false
  } finally {
    await client.end().catch(() => undefined)
  }
}

/**
 * Whether the Postgres suites run. Without a server they are skipped, loudly;
 * with CONNECTOR_STORE_REQUIRE_PG=1 (CI) a missing server is an error.
 */
export const pgAvailable: boolean = await probe()
if (!pgAvailable && PG_REQUIRED) throw new Error(`Postgres is required (CONNECTOR_STORE_REQUIRE_PG=1) but ${PG_ADMIN_URL} did not answer`)

const withAdmin = async <A>(use: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: PG_ADMIN_URL })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

let fileDatabase: Promise<string> | undefined

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Drops the databases of test processes that died before their cleanup ran. */
const dropOrphans = (client: pg.Client) =>
  client.query<{ datname: string }>("SELECT datname FROM pg_database WHERE datname LIKE 'cs_test_%'").then(async ({ rows }) => {
    for (const { datname } of rows) {
      const pid = Number(datname.split("_")[2])
      if (Number.isInteger(pid) && !isAlive(pid)) {
        await client.query(`DROP DATABASE IF EXISTS ${datname} WITH (FORCE)`).catch(() => undefined)
      }
    }
  })

/**
 * The URL of a Postgres database of this test file's own, created on first
 * use and dropped when the file's tests end; suites isolate further by table
 * prefix (`freshPrefix`).
 */
export const pgDatabaseForFile = (): Promise<string> => {
  if (fileDatabase === undefined) {
    const name = `cs_test_${process.pid}_${randomBytes(4).toString("hex")}`
    fileDatabase = withAdmin(async (client) => {
      await dropOrphans(client)
      await client.query(`CREATE DATABASE ${name}`)
      // Every session on the file's database (the tests' pools, the spawned CLI and processes) commits without
      // waiting for the WAL flush: a commit is still atomic and visible to every other session the moment it
      // returns, only a crash of the Postgres server itself could lose the last ones, and no test crashes the
      // server (a backend terminated or a connection cut is no server crash). The tests' Postgres time was
      // largely fsync waits: ~1.2 ms a commit on an idle disk, more beside a benchmark.
      await client.query(`ALTER DATABASE ${name} SET synchronous_commit = off`)
    }).then(() => {
      const url = new URL(PG_ADMIN_URL)
      url.pathname = `/${name}`
      return url.toString()
    })
    droppedAtEnd = name
  }
  return fileDatabase
}

let droppedAtEnd: string | undefined

let prefixes = 0

/** A table prefix no other store in this process uses. */
export const freshPrefix = (): string => `t${process.pid}_${++prefixes}_`

let fileTempDir: string | undefined

/**
 * A temporary folder of this test file's own, removed when the file's tests
 * end (pass or fail). It lies inside the run's temp root (`globalSetup.ts`),
 * which is removed when the run ends, so a file whose cleanup did not run
 * (a crashed worker) leaves nothing behind either.
 */
export const freshTempDir = (): string => {
  if (fileTempDir === undefined) {
    const root = inject("tempRoot") ?? tmpdir()
    fileTempDir = mkdtempSync(join(root, "connector-store-"))
  }
  return fileTempDir
}

/**
 * Starts a test file: its Postgres database and temp folder are made anew
 * on first use; and registers (while the file is collected: a hook
 * registered from inside a running test never runs) the hooks that skip its
 * Postgres suites when no server answered (counted and printed at the end of
 * the run by the PostgresSkips reporter), and that drop its database and
 * remove its temp folder when its tests end, pass or fail. Called by
 * `perFile.ts`, the setup file vitest runs before every test file: a worker
 * runs several files and keeps this module loaded between them.
 */
export const startTestFile = (): void => {
  fileDatabase = undefined
  droppedAtEnd = undefined
  fileTempDir = undefined
  if (!pgAvailable) beforeAll((file) => void skipPostgresSuites(file))
  afterAll(async () => {
    const name = droppedAtEnd
    const dir = fileTempDir
    fileDatabase = undefined
    droppedAtEnd = undefined
    fileTempDir = undefined
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true, maxRetries: 3 })
    if (name !== undefined) await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  })
}

/** A path for a new SQLite file in this test file's temporary folder (`freshTempDir`). */
export const freshSqlitePath = (): string => join(freshTempDir(), `${randomBytes(6).toString("hex")}.sqlite`)
