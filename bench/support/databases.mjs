// Scratch databases for benches: SQLite files in a temporary folder and one
// Postgres database per run, both removed when the run ends.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import pg from "pg"

/** The Postgres server benches use (a maintenance database on it). */
export const PG_ADMIN_URL = process.env.CONNECTOR_STORE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** Runs `use` with a client of its own connected to `url`, ended after. */
export const withClient = async (url, use) => {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 })
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

const withAdmin = (use) => withClient(PG_ADMIN_URL, use)

/**
 * Creates a scratch Postgres database (`cs_bench_<pid>_<random>`) and returns
 * `{ url, drop }`, or `{ skip }` saying why Postgres cannot be used.
 */
export const scratchPostgres = async () => {
  const name = `cs_bench_${process.pid}_${randomBytes(3).toString("hex")}`
  try {
    await withAdmin((client) => client.query(`CREATE DATABASE ${name}`))
  } catch (error) {
    return { skip: `Postgres at ${PG_ADMIN_URL} is not usable (${error.message})` }
  }
  const url = new URL(PG_ADMIN_URL)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    drop: () => withAdmin((client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
  }
}

/** A temporary folder for SQLite files: `path(name)` inside it, `remove()` deletes it all. */
export const scratchSqliteFolder = () => {
  const dir = mkdtempSync(join(tmpdir(), "connector-store-bench-"))
  return {
    path: (name) => join(dir, name),
    remove: () => rmSync(dir, { recursive: true, force: true })
  }
}

/** A bench file's scratch databases (its `before`): a SQLite folder, and a Postgres database or why there is none. */
export const scratchDatabases = async () => ({ sqlite: scratchSqliteFolder(), postgres: await scratchPostgres() })

/** Removes what `scratchDatabases` made (a bench file's `after`). */
export const removeScratchDatabases = async (context) => {
  context.sqlite.remove()
  await context.postgres.drop?.()
}
