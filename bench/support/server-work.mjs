// The Postgres server's work per operation lifecycle (claimOperation with
// markSent of a new key → finalizeOperationAndArmWatch), counted on the
// server: rows inserted/updated (HOT or not)/deleted per table, WAL
// records and bytes per relation of the store's tables, with the index
// entries added (B-tree leaf inserts: pg_stat_user_indexes counts no
// inserts), read with pg_walinspect (created in the database; other
// databases' WAL is left out), index tuples read, and the CPU the store's
// backends used (/proc/<pid>/stat, so the server must run on this machine;
// 10 ms ticks, so read it over many lifecycles). Table and index statistics
// are read after the store's connections closed (a backend flushes its
// counters at exit).
import { openConnectorStore } from "@connector-store/sql-adapter"
import { readFileSync } from "node:fs"
import pg from "pg"
import { lifecycleOver, lifecyclePlan, winnerOf } from "./operation-lifecycle.mjs"

const query = async (url, text, params) => {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(text, params)).rows
  } finally {
    await client.end()
  }
}

const tableStats = (url, prefix) =>
  query(url, `SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del FROM pg_stat_user_tables WHERE relname LIKE $1 || '%'`, [prefix])
const indexStats = (url, prefix) =>
  query(url, `SELECT indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE relname LIKE $1 || '%'`, [prefix])
const lsn = async (url) => (await query(url, `SELECT pg_current_wal_lsn() AS lsn`))[0]

/** WAL records between two LSNs that touch relations of `prefix` (by relfilenode), grouped by relation and record type. */
const walOf = async (url, prefix, from, to) => {
  await query(url, `CREATE EXTENSION IF NOT EXISTS pg_walinspect`)
  const rels = await query(url, `SELECT c.relfilenode::text AS node, c.relname FROM pg_class c
    WHERE c.relname LIKE $1 || '%' AND c.relfilenode <> 0`, [prefix])
  const dboid = (await query(url, `SELECT oid::text FROM pg_database WHERE datname = current_database()`))[0].oid
  const names = new Map(rels.map((r) => [r.node, r.relname]))
  const records = await query(url, `SELECT xid::text, resource_manager AS rm, record_type AS type, record_length AS len, fpi_length AS fpi,
    block_ref FROM pg_get_wal_records_info($1, $2)`, [from, to])
  const mine = new Set()
  const byRel = new Map()
  for (const r of records) {
    const m = /rel \d+\/(\d+)\/(\d+)/.exec(r.block_ref ?? "")
    if (m === null || m[1] !== dboid || !names.has(m[2])) continue
    mine.add(r.xid)
    const key = `${names.get(m[2])} ${r.rm}/${r.type}`
    const at = byRel.get(key) ?? { n: 0, bytes: 0, fpi: 0 }
    at.n++
    at.bytes += r.len
    at.fpi += r.fpi
    byRel.set(key, at)
  }
  let other = { n: 0, bytes: 0 }
  for (const r of records) {
    if (r.xid !== "0" && mine.has(r.xid) && (r.block_ref ?? "") === "") {
      const key = `(no block) ${r.rm}/${r.type}`
      const at = byRel.get(key) ?? { n: 0, bytes: 0, fpi: 0 }
      at.n++
      at.bytes += r.len
      byRel.set(key, at)
    }
  }
  return byRel
}

/** CPU seconds (user + system) of the client backends connected to `url`'s database, but the asking one. */
const backendCpu = async (url) => {
  const pids = await query(url, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
    AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
  let ticks = 0
  for (const { pid } of pids) {
    try {
      const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone
    }
  }
  return { ticks, backends: pids.length }
}

const delta = (after, before, key) => {
  const old = new Map(before.map((r) => [r[key], r]))
  return after.map((r) => {
    const b = old.get(r[key]) ?? {}
    const out = { [key]: r[key] }
    for (const [k, v] of Object.entries(r)) if (k !== key) out[k] = Number(v) - Number(b[k] ?? 0)
    return out
  })
}

/**
 * Runs `n` lifecycles on `workers` runners of a store on `url` under `prefix`
 * (after `warm` untimed ones), with `prepare(url, prefix)` run once after the
 * store migrated. Returns per-lifecycle figures.
 */
export const serverWork = async ({ url, prefix, n = 2000, warm = 200, workers = 1, prepare, afterWarm, storeOptions = {} }) => {
  const open = () => openConnectorStore({ url, tablePrefix: prefix, maxConnections: 10, readWinner: winnerOf, ...storeOptions })
  const plan = lifecyclePlan()
  let store = await open()
  if (prepare !== undefined) await prepare(url, prefix)
  const lifecycle = lifecycleOver(store, plan, { markSent: true })
  for (let i = 0; i < warm; i++) await lifecycle(0)
  await store.close()
  if (afterWarm !== undefined) await afterWarm(url, prefix)
  await new Promise((r) => setTimeout(r, 300))
  store = await open()
  const cycle = lifecycleOver(store, plan, { markSent: true })
  // Table and index statistics count from here (read after the close: `n` + `workers` lifecycles), the WAL
  // and the CPU after a first round that opens the pool's connections (runners open them as they need them).
  const tBefore = await tableStats(url, prefix)
  const iBefore = await indexStats(url, prefix)
  await Promise.all(Array.from({ length: workers }, (_, w) => cycle(w)))
  const wBefore = await lsn(url)
  const cpuBefore = await backendCpu(url)
  let left = n
  const started = performance.now()
  await Promise.all(Array.from({ length: workers }, async (_, w) => {
    while (left > 0) {
      left--
      await cycle(w)
    }
  }))
  const ms = performance.now() - started
  const cpuAfter = await backendCpu(url)
  await store.close()
  await new Promise((r) => setTimeout(r, 500))
  const wAfter = await lsn(url)
  const tAfter = await tableStats(url, prefix)
  const iAfter = await indexStats(url, prefix)
  // A checkpoint may have recycled the segments already (other databases write WAL too): then no breakdown.
  const wal = await walOf(url, prefix, wBefore.lsn, wAfter.lsn).catch(() => new Map())
  return {
    rate: (n / ms) * 1000,
    serverCpuMicros: ((cpuAfter.ticks - cpuBefore.ticks) * 10_000) / n,
    backends: [cpuBefore.backends, cpuAfter.backends],
    tables: delta(tAfter, tBefore, "relname").filter((r) => r.n_tup_ins + r.n_tup_upd + r.n_tup_del > 0),
    indexes: delta(iAfter, iBefore, "indexrelname").filter((r) => r.idx_scan > 0),
    wal,
    n,
    counted: n + workers
  }
}

/**
 * `result` as lines: per table, per index (entries added: its B-tree leaf-insert records; an entry
 * that splits a page is logged in the split's record instead, so the count runs a little under), the
 * WAL and CPU totals.
 */
export const printServerWork = (label, result) => {
  const per = (v) => (v / result.n).toFixed(2)
  const perCounted = (v) => (v / result.counted).toFixed(2)
  const lines = [
    `${label}: ${result.n} lifecycles, ${result.rate.toFixed(0)}/s; store backends' CPU ${result.serverCpuMicros.toFixed(0)} µs per lifecycle`
  ]
  for (const t of result.tables) {
    lines.push(
      `    ${t.relname}: inserted ${perCounted(t.n_tup_ins)}, updated ${perCounted(t.n_tup_upd)} (HOT ${perCounted(t.n_tup_hot_upd)}), ` +
        `deleted ${perCounted(t.n_tup_del)}`
    )
  }
  const byRelation = new Map()
  for (const [key, v] of result.wal) {
    const [relation, kind] = key.startsWith("(no block)") ? ["(commits)", key.slice(11)] : key.split(" ")
    const at = byRelation.get(relation) ?? { n: 0, bytes: 0, entries: 0 }
    at.n += v.n
    at.bytes += v.bytes + 0
    if (kind === "Btree/INSERT_LEAF" || kind === "Btree/INSERT_POST") at.entries += v.n
    byRelation.set(relation, at)
  }
  let records = 0
  let bytes = 0
  let entries = 0
  for (const [relation, v] of [...byRelation.entries()].sort()) {
    records += v.n
    bytes += v.bytes
    entries += v.entries
    lines.push(`    WAL ${relation}: ${per(v.n)} records, ${per(v.bytes)} B${v.entries > 0 ? `, ${per(v.entries)} index entries` : ""}`)
  }
  const read = result.indexes.filter((i) => i.idx_tup_read / result.counted >= 1)
  lines.push(
    `    per lifecycle: ${per(entries)} index entries, ${per(records)} WAL records, ${per(bytes)} WAL bytes of these tables and commits` +
      (result.wal.size === 0 ? " (none: the WAL was recycled before it was read)" : ""),
    `    index tuples read per lifecycle: ${read.map((i) => `${i.indexrelname} ${perCounted(i.idx_tup_read)}`).join(", ") || "none over 1"}`
  )
  return lines.join("\n")
}
