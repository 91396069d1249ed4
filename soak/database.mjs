// The soak's database: a SQLite file in a fresh folder, or a fresh Postgres
// database on 127.0.0.1:5432 (dropped after the run) or on the failover
// soak's own cluster; and raw reads of the operation table for the checks,
// independent of the store's own code.
import { randomBytes } from "node:crypto"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import Database from "better-sqlite3"
import pg from "pg"

const PG_ADMIN_URL = process.env.CONNECTOR_STORE_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"
const OPERATIONS = "kubun_connector_operation"

const withClient = async (connectionString, use) => {
  const client = new pg.Client({ connectionString, connectionTimeoutMillis: 5_000 })
  client.on("error", () => {})
  await client.connect()
  try {
    return await use(client)
  } finally {
    await client.end()
  }
}

/** A scratch folder for the run's files (ledger, events, the SQLite file). */
export const scratchFolder = () => {
  const dir = mkdtempSync(join(tmpdir(), "connector-store-soak-"))
  return { dir, path: (name) => join(dir, name), remove: () => rmSync(dir, { recursive: true, force: true }) }
}

/** The table's rows at `url` (a Postgres database URL). */
export const rowsAt = (url) => withClient(url, async (client) => (await client.query(`SELECT * FROM ${OPERATIONS}`)).rows)

/**
 * Creates the run's database: `{ url, rows(), integrity(), drop() }`; on
 * Postgres through `adminUrl` (the failover soak's floating address: its
 * cluster goes with the run, so nothing is dropped).
 */
export const createDatabase = async (backend, folder, adminUrl) => {
  if (backend === "sqlite") {
    const url = folder.path("soak.sqlite")
    const open = () => new Database(url, { readonly: true, fileMustExist: true })
    return {
      url,
      rows: async () => {
        const db = open()
        try {
          return db.prepare(`SELECT * FROM ${OPERATIONS}`).all()
        } finally {
          db.close()
        }
      },
      integrity: async () => {
        const db = open()
        try {
          return db.prepare("PRAGMA integrity_check").all().map((row) => row.integrity_check).join("; ")
        } finally {
          db.close()
        }
      },
      drop: async () => {}
    }
  }
  const admin = adminUrl ?? PG_ADMIN_URL
  const name = `cs_soak_${process.pid}_${randomBytes(3).toString("hex")}`
  await withClient(admin, (client) => client.query(`CREATE DATABASE ${name}`))
  const url = new URL(admin)
  url.pathname = `/${name}`
  return {
    url: url.toString(),
    name,
    rows: () => rowsAt(url.toString()),
    integrity: async () => null,
    drop: async () => {
      if (adminUrl === undefined) await withClient(admin, (client) => client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`))
    }
  }
}

/** A raw row's timestamps as numbers (Postgres returns bigint as text). */
export const millisOf = (value) => value === null || value === undefined ? null : Number(value)
