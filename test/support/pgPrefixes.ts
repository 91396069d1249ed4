import { tableNames } from "@connector-store/sql-adapter"
import { Effect, Layer } from "effect"
import pg from "pg"
import { afterAll, onTestFinished } from "vitest"
import { freshPrefix } from "./databases.js"

/**
 * Table prefixes handed on from one test's Postgres store to a later test's
 * in the same file, so that most stores open on tables that are already
 * migrated (emptied first) instead of running every migration under a new
 * prefix: a new prefix costs a pool and nine migrations (~200 ms), a reused
 * one a catalog check and a DELETE per table (~10 ms).
 *
 * A prefix is handed on only when nothing can still use it and it is as a
 * fresh store leaves it:
 * - its layer was made inside a running test (not in a `beforeAll`, nor at
 *   the file's top level, where a store may serve several tests), that test
 *   passed, and every build of the layer has been released (the store
 *   closed): a layer value keeps its prefix for as long as it lives, so two
 *   builds of one layer still meet on the same tables, as before;
 * - before it is reused, its tables, columns, constraints, indexes,
 *   triggers, grants and applied migrations are the same as those of a
 *   prefix that was just migrated (a test that added a trigger or a
 *   constraint, dropped a column or wrote a newer migration row leaves its
 *   prefix unused), and its rows are deleted within a lock timeout; any
 *   doubt and the store gets a new prefix instead.
 *
 * `CONNECTOR_STORE_PG_FRESH_PREFIXES=1` turns this off (a new prefix per
 * store, every store migrating its own tables).
 */
const enabled = process.env["CONNECTOR_STORE_PG_FRESH_PREFIXES"] !== "1"

/** The tables a store under `prefix` keeps rows in, by the adapter's own names (the migrations table keeps its rows). */
const dataTables = (prefix: string): ReadonlyArray<string> => {
  const { index: _index, migrations: _migrations, prefix: _prefix, ...tables } = tableNames(prefix)
  return Object.values(tables)
}

/** Everything of a prefix's schema that a test could change, with the prefix taken out of every name. */
const SHAPE = `
  WITH rel AS (
    SELECT c.oid, c.relname, c.relkind, c.relacl, c.relrowsecurity, c.relforcerowsecurity, c.reloptions
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND starts_with(c.relname, $1)
  )
  SELECT string_agg(line, E'\\n' ORDER BY line) AS shape FROM (
    SELECT 'rel ' || relname || ' ' || relkind::text || ' ' || coalesce(relacl::text, '-') || ' ' || relrowsecurity || relforcerowsecurity
      || ' ' || coalesce(reloptions::text, '-') AS line FROM rel
    UNION ALL
    SELECT 'col ' || r.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' ' || a.attnotnull
      || ' ' || coalesce(pg_get_expr(d.adbin, d.adrelid), '-') || ' ' || coalesce(a.attacl::text, '-')
    FROM rel r JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = r.oid AND d.adnum = a.attnum
    UNION ALL
    SELECT 'con ' || r.relname || ' ' || k.conname || ' ' || pg_get_constraintdef(k.oid) || ' ' || k.convalidated
    FROM rel r JOIN pg_constraint k ON k.conrelid = r.oid
    UNION ALL
    SELECT 'idx ' || pg_get_indexdef(i.indexrelid) || ' ' || i.indisvalid FROM rel r JOIN pg_index i ON i.indrelid = r.oid
    UNION ALL
    SELECT 'trg ' || r.relname || ' ' || t.tgname || ' ' || t.tgenabled::text FROM rel r JOIN pg_trigger t ON t.tgrelid = r.oid
    UNION ALL
    SELECT 'rule ' || r.relname || ' ' || w.rulename FROM rel r JOIN pg_rewrite w ON w.ev_class = r.oid
    UNION ALL
    SELECT 'policy ' || r.relname || ' ' || p.polname FROM rel r JOIN pg_policy p ON p.polrelid = r.oid
    UNION ALL
    SELECT 'proc ' || p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname = current_schema() AND starts_with(p.proname, $1)
    UNION ALL
    SELECT 'type ' || t.typname FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = current_schema() AND starts_with(t.typname, $1) AND t.typrelid = 0
  ) lines`

/** A prefix's schema and applied migrations, every name relative to the prefix (comparable across prefixes). */
const shapeOf = async (client: pg.Client, prefix: string): Promise<string> => {
  const { rows: [row] } = await client.query<{ shape: string | null }>(SHAPE, [prefix])
  const { rows: migrations } = await client.query<{ id: number; name: string }>(`SELECT id, name FROM ${tableNames(prefix).migrations} ORDER BY id`)
  return [row?.shape ?? "", ...migrations.map(({ id, name }) => `migration ${id} ${name}`)].join("\n").split(prefix).join("<prefix>")
}

/** This file's connection for the checks and the deletes (one database per file). */
let admin: { readonly url: string; readonly client: Promise<pg.Client> } | undefined
const adminFor = (url: string): Promise<pg.Client> => {
  if (admin === undefined || admin.url !== url) {
    const client = new pg.Client({ connectionString: url, application_name: "connector-store-tests-prefixes" })
    admin = { url, client: client.connect().then(() => client) }
  }
  return admin.client
}

/** The shape of a prefix fresh from its migrations (the first one this file migrated), per database. */
const reference = new Map<string, string>()
/** Prefixes whose stores are closed and whose test passed, ready to be checked and emptied for another store. */
const idle = new Map<string, Array<string>>()

/**
 * Starts a test file with no prefix to hand on, and registers the hook that
 * closes its connection when its tests end (see `perFile.ts`: a worker keeps
 * this module loaded between files, each with a database of its own).
 */
export const startTestFilePrefixes = (): void => {
  reference.clear()
  idle.clear()
  admin = undefined
  afterAll(async () => {
    const open = admin
    admin = undefined
    reference.clear()
    idle.clear()
    if (open !== undefined) await open.client.then((client) => client.end(), () => undefined)
  })
}

/** Empties `prefix` for a new store when its shape is a fresh prefix's; false (leave it) otherwise. */
const reclaim = async (url: string, prefix: string): Promise<boolean> => {
  const expected = reference.get(url)
  if (expected === undefined) return false
  const client = await adminFor(url)
  try {
    if (await shapeOf(client, prefix) !== expected) return false
    await client.query("BEGIN")
    await client.query("SET LOCAL lock_timeout = '2s'")
    for (const table of dataTables(prefix)) await client.query(`DELETE FROM ${table}`)
    await client.query("COMMIT")
    return true
  } catch {
    await client.query("ROLLBACK").catch(() => undefined)
    return false
  }
}

/** A prefix for a store on `url`: an idle one emptied, or a new one (`fresh`). */
const take = async (url: string): Promise<{ readonly prefix: string; readonly fresh: boolean }> => {
  const ready = idle.get(url) ?? []
  for (let prefix = ready.pop(); prefix !== undefined; prefix = ready.pop()) {
    if (await reclaim(url, prefix)) return { prefix, fresh: false }
  }
  return { prefix: freshPrefix(), fresh: true }
}

/** Notes `prefix`'s shape as a fresh one's, when none is noted for `url` yet (called right after its migrations). */
const noteReference = async (url: string, prefix: string): Promise<void> => {
  if (reference.has(url)) return
  reference.set(url, await shapeOf(await adminFor(url), prefix))
}

/** Whether a test is running now, and a way to hear when it ends (with whether it passed). */
const whenTestEnds = (listener: (passed: boolean) => void): boolean => {
  try {
    onTestFinished(({ task }) => listener(task.result?.state === "pass"))
    return true
  } catch {
    return false
  }
}

/**
 * A Postgres store layer on `url` under a table prefix of its own, made by
 * `make`: an emptied prefix of an earlier test's closed store where one is
 * ready, a new one otherwise (see above). Every build of the returned layer
 * uses the same prefix, like a layer made with `freshPrefix()` does.
 */
export const layerWithPrefix = <A, E, R>(url: string, make: (prefix: string) => Layer.Layer<A, E, R>): Layer.Layer<A, E, R> => {
  if (!enabled) return make(freshPrefix())
  const slot = { prefix: undefined as Promise<{ readonly prefix: string; readonly fresh: boolean }> | undefined, builds: 0, ended: false, passed: false }
  const handOn = async () => {
    if (slot.ended && slot.passed && slot.builds === 0 && slot.prefix !== undefined) {
      const { prefix } = await slot.prefix
      slot.prefix = undefined
      const ready = idle.get(url) ?? []
      idle.set(url, ready)
      if (!ready.includes(prefix)) ready.push(prefix)
    }
  }
  const inTest = whenTestEnds((passed) => {
    slot.ended = true
    slot.passed = passed
    return handOn()
  })
  const prefixOf = (): Promise<{ readonly prefix: string; readonly fresh: boolean }> => {
    if (slot.prefix !== undefined) return slot.prefix
    // Outside a test the prefix is never handed on: a new one, as before.
    slot.prefix = inTest ? take(url) : Promise.resolve({ prefix: freshPrefix(), fresh: true })
    return slot.prefix
  }
  return Layer.unwrapScoped(Effect.gen(function*() {
    const { prefix, fresh } = yield* Effect.acquireRelease(
      Effect.promise(prefixOf).pipe(Effect.tap(() => Effect.sync(() => slot.builds++))),
      () => Effect.promise(() => (slot.builds--, handOn()))
    )
    const built = make(prefix)
    return fresh && !reference.has(url) ? Layer.tap(built, () => Effect.promise(() => noteReference(url, prefix))) : built
  }))
}
