import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"
import { afterAll } from "vitest"

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
if (!pgAvailable) {
  if (PG_REQUIRED) throw new Error(`Postgres is required (CONNECTOR_STORE_REQUIRE_PG=1) but ${PG_ADMIN_URL} did not answer`)
  console.warn(`\n*** Postgres at ${PG_ADMIN_URL} did not answer: SKIPPING every Postgres suite in this file ***\n`)
}

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
    }).then(() => {
      const url = new URL(PG_ADMIN_URL)
      url.pathname = `/${name}`
      return url.toString()
    })
    afterAll(async () => {
      await withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    })
  }
  return fileDatabase
}

let prefixes = 0

/** A table prefix no other store in this process uses. */
export const freshPrefix = (): string => `t${process.pid}_${++prefixes}_`

let sqliteDir: string | undefined

/** A path for a new SQLite file in a temporary folder removed when the file's tests end. */
export const freshSqlitePath = (): string => {
  if (sqliteDir === undefined) {
    const dir = mkdtempSync(join(tmpdir(), "connector-store-"))
    sqliteDir = dir
    afterAll(() => rmSync(dir, { recursive: true, force: true }))
  }
  return join(sqliteDir, `${randomBytes(6).toString("hex")}.sqlite`)
}
