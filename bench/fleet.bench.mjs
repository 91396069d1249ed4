// A fleet of runners on one Postgres database.
//
// 1. Drain: a backlog of due operations (inserted in one INSERT … SELECT,
//    rows as the store writes them) drained by runners that loop
//    `claimDueOperations({ limit })` and drive each operation they are
//    leased (markOperationSent → finalizeOperationAndArmWatch), in three
//    shapes: 1 process × 1 runner, 1 × 8, and 4 processes × 4 runners (child
//    processes, a store each). Beside each: the same drain on raw `pg`
//    sending the store's very statements (support/due-drain-raw-steps.mjs),
//    and the store drained the way before the batch call (each runner pages
//    `listDueWork` and claims every listed row by its key). Every drain is
//    judged afterwards: each operation committed exactly once, no operation
//    leased to two runners at once.
// 2. Against pg-boss: the store's lifecycle (claimOperation of a new key
//    marking its request sent → finalizeOperationAndArmWatch; and, beside
//    it, with markOperationSent apart) against pg-boss's
//    send → fetch → complete, 1 and 8 runners, alternating rounds in this
//    process, same database (pg-boss in a schema of its own); statements
//    per unit counted at the wire.
// 3. One owner's backlog: batches over 100,000 due rows of one owner and
//    one due row of each of 5 others (support/owner-backlog.mjs), plain and
//    with the backlog's account paused, on Postgres and SQLite; the same
//    for claimDueWatches over 100,000 due watches.
// 4. Opt-in (`--huge`): one due page and one batch claim of 500 at
//    10,000,000 rows against 100,000, on Postgres and SQLite.
//
//   npm run bench -- fleet                      drains of 2,000 operations (about two minutes)
//   npm run bench -- fleet --ops 100000         the full figure (BENCH_FLEET_OPS)
//   npm run bench -- fleet --limit 50           batches (and pages) of 50 (BENCH_FLEET_LIMIT; default 20)
//   --pages-ops N (BENCH_FLEET_PAGES_OPS)       the backlog of the way before the batch call (default: --ops, at most 300)
//   --warm N (BENCH_FLEET_WARM)                 operations each process drains untimed first (default 100)
//   npm run bench -- "backlog"                  the owners' case alone
//   --backlog-rows N (BENCH_FLEET_BACKLOG_ROWS) its backlog, and the --huge case's reference (default 100,000)
//   npm run bench -- "due page" --huge          the 10,000,000-row case alone (BENCH_FLEET_HUGE=1; ~80 GB free disk
//                                               is plenty: it takes about 12 GB while it runs, removed afterwards)
import { openConnectorStore } from "@connector-store/sql-adapter"
import { scratchPostgres, scratchSqliteFolder } from "./support/databases.mjs"
import { drainedCleanly, FLEET_POOL, runDrain } from "./support/fleet-drain.mjs"
import { pgAtScale, scaleLines, sqliteAtScale } from "./support/due-page-scale.mjs"
import {
  OTHERS,
  ownerBacklogLines,
  pgOwnerBacklog,
  pgWatchBacklog,
  sqliteOwnerBacklog,
  sqliteWatchBacklog,
  watchBacklogLines
} from "./support/owner-backlog.mjs"
import { measureCase, measurementSettings } from "./support/measure.mjs"
import { lifecycleOver, lifecyclePlan, winnerOf } from "./support/operation-lifecycle.mjs"
import { countOption, flagOption } from "./support/options.mjs"
import { openPgBoss } from "./support/pg-boss-unit.mjs"
import { startRoundTripProxy, throughProxy } from "./support/round-trips.mjs"

const OPS = countOption("ops", "BENCH_FLEET_OPS", 2_000)
/** The way before the batch call is slow and only a reference: its backlog is at most this. */
const PAGES_OPS = countOption("pages-ops", "BENCH_FLEET_PAGES_OPS", Math.min(OPS, 300))
const LIMIT = countOption("limit", "BENCH_FLEET_LIMIT", 20)
/** Each process first drains this many operations of its own, untimed, so the timed drain runs warm code. */
const WARM = countOption("warm", "BENCH_FLEET_WARM", 100, { zero: true })
const HUGE = flagOption("huge", "BENCH_FLEET_HUGE")
const HUGE_ROWS = countOption("huge-rows", "BENCH_FLEET_HUGE_ROWS", 10_000_000)
/** The owners' cases' backlog, and the size the `--huge` case compares with. */
const SMALL_ROWS = countOption("backlog-rows", "BENCH_FLEET_BACKLOG_ROWS", 100_000)
/** The drain's shapes: [processes, runners per process]. */
const SHAPES = [[1, 1], [1, 8], [4, 4]]
/** The aim: 4 × 4 drains at least this many times as fast as 1 × 1, with no double claim. */
const SCALING_AIM = 2.5
/** The drain whose round trips are counted at the wire (1 × 1, through a proxy, apart from the timed drains). */
const COUNTED_OPS = 100
/** Each side's pool in the pg-boss comparison (as the store's in the other benches). */
const POOL = 10
const COUNTED_UNITS = 100

const number = (n) => Math.round(n).toLocaleString("en-US")
const times = (n) => `${n.toFixed(2)}×`
const mb = (bytes) => `${Math.round(bytes / 1024 / 1024)}`
const shapeName = ([processes, runners]) => `${processes} × ${runners}`
const rssOf = (result) => {
  const all = result.peakRssBytes.map(mb)
  return new Set(all).size === 1 ? `${all[0]} MB` : `${all.join("/")} MB`
}

/** What a drain's judgement says, in a few words ("ok" when every operation was committed once, no double claim). */
const verdictOf = (result) => {
  if (drainedCleanly(result)) return "ok"
  const { tables, leases } = result
  return `NOT CLEAN: ${leases.doubleClaims} double claims${leases.examples.length > 0 ? ` (${leases.examples.join("; ")})` : ""}, ` +
    `${result.committed} lifecycles for ${tables.ops} operations (${result.distinctCommits} distinct), ` +
    `${tables.committed} committed, ${tables.once} by one lifecycle, ${tables.watches} watches`
}

const drainCase = async (context) => {
  if (context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const url = context.postgres.url
  const drain = (shape, side, way, ops = OPS, proxied) =>
    runDrain(url, { processes: shape[0], runners: shape[1], side, way, limit: LIMIT, ops, warm: proxied === undefined ? WARM : 0, proxied })
  const results = []
  for (const [i, shape] of SHAPES.entries()) {
    const row = { shape }
    // Store and raw alternate which goes first, so drift weighs on both alike.
    for (const side of i % 2 === 0 ? ["store", "raw"] : ["raw", "store"]) row[side] = await drain(shape, side, "batches")
    row.pages = await drain(shape, "store", "pages", PAGES_OPS)
    results.push(row)
  }
  // The statements per drained operation, at the wire, apart from the timed drains (the proxy adds latency).
  const via = throughProxy(url)
  const proxy = await startRoundTripProxy(via.target)
  const counted = {}
  try {
    for (const side of ["store", "raw"]) {
      counted[side] = await drain([1, 1], side, "batches", COUNTED_OPS, { url: via.at(proxy.port), roundTrips: proxy.roundTrips })
    }
  } finally {
    await proxy.close()
  }

  const [one] = results
  const four = results[2]
  const lines = [
    `    ${OPS.toLocaleString("en-US")} due operations per drain, batches of ${LIMIT}; each process its own store (or raw pool) of ` +
      `${FLEET_POOL} connections, warmed up on ${WARM} operations of its own first`,
    `    ${"shape".padEnd(7)} ${"store/s".padStart(8)} ${"raw/s".padStart(8)} ${"store÷raw".padStart(9)}  ${"÷ 1 × 1 (store, raw)".padEnd(20)}  ` +
    `${"rows asked → claimed".padEnd(24)} ${"double claims".padEnd(13)}  ${"peak RSS per process (store; raw)"}`
  ]
  for (const { shape, store, raw } of results) {
    lines.push(
      `    ${shapeName(shape).padEnd(7)} ${number(store.rate).padStart(8)} ${number(raw.rate).padStart(8)} ${times(store.rate / raw.rate).padStart(9)}  ` +
        `${`${times(store.rate / one.store.rate)}, ${times(raw.rate / one.raw.rate)}`.padEnd(20)}  ` +
        `${`${number(store.asked)} → ${number(store.won)} (${Math.round((100 * store.won) / store.asked)}%)`.padEnd(24)} ` +
        `${String(store.leases.doubleClaims).padEnd(13)}  ${rssOf(store)}; ${rssOf(raw)}`
    )
  }
  const scaling = four.store.rate / one.store.rate
  const clean = results.every((r) => drainedCleanly(r.store) && drainedCleanly(r.raw) && drainedCleanly(r.pages))
  lines.push(
    `    4 × 4 ÷ 1 × 1 = ${times(scaling)} (raw pg ${times(four.raw.rate / one.raw.rate)}): ≥${times(SCALING_AIM)} with 0 double claims ` +
      `${scaling >= SCALING_AIM && clean ? "met" : "MISSED"}`,
    `    client CPU per lifecycle (all processes), store ÷ raw: ` +
      results.map(({ shape, store, raw }) => {
        const cpu = (r) => r.cpuMicros.reduce((a, b) => a + b, 0) / r.committed
        return `${shapeName(shape)} ${number(cpu(store))} µs ÷ ${number(cpu(raw))} µs = ${times(cpu(store) / cpu(raw))}`
      }).join(", "),
    `    the way before the batch call (each runner pages listDueWork({ limit: ${LIMIT} }) and claims each listed row by its key), ` +
      `store, ${PAGES_OPS.toLocaleString("en-US")} due operations:`,
    ...results.map(({ shape, store, pages }) => {
      const others = Object.entries(pages.answers).map(([outcome, n]) => `${number(n)} ${outcome}`).join(", ") || "none other"
      return `      ${shapeName(shape).padEnd(7)} ${number(pages.rate).padStart(6)}/s (${times(pages.rate / store.rate)} the batch drain's), ` +
        `claims sent ${number(pages.asked)} → claimed ${number(pages.won)} (${Math.round((100 * pages.won) / pages.asked)}%; ${others}), ` +
        `${pages.leases.doubleClaims} double claims, peak RSS ${rssOf(pages)}`
    }),
    `    round trips per drained operation (at the wire, a 1 × 1 drain of ${COUNTED_OPS} through a proxy): ` +
      `store ${(counted.store.roundTrips / COUNTED_OPS).toFixed(2)}, raw ${(counted.raw.roundTrips / COUNTED_OPS).toFixed(2)} ` +
      `(a batch: BEGIN, the locked due page, one lease write, COMMIT; a lifecycle: mark 1 + finalize 5; the raw reference sends the same)`,
    `    every drain judged afterwards (each operation committed by exactly one lifecycle, version 5 and 2 attempts, ` +
      `one watch each; leases overlapping on one operation): ` +
      (clean ? "all clean" : results.flatMap((r) => ["store", "raw", "pages"].map((k) => `${shapeName(r.shape)} ${k}: ${verdictOf(r[k])}`)).join("; "))
  )
  return lines
}

const pgBossCase = async (context) => {
  if (context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const url = context.postgres.url
  const settings = measurementSettings(process.env)
  const store = await openConnectorStore({ url, tablePrefix: "fleet_vs_boss_", maxConnections: POOL, readWinner: winnerOf })
  // The same store with its statements sent unnamed, to weigh named prepared statements in the same rounds,
  // on the same tables (on tables of its own, fresher and half as full, it ran up to 15% faster at 8 runners).
  const unprepared = await openConnectorStore({
    url,
    tablePrefix: "fleet_vs_boss_",
    maxConnections: POOL,
    prepareStatements: false,
    readWinner: winnerOf
  })
  const boss = await openPgBoss(url, { schema: "fleet_boss", max: POOL })
  const lines = [
    `    ${"runners".padEnd(8)} ${"lifecycle".padEnd(40)} ${"store/s".padStart(8)} ${"pg-boss/s".padStart(9)}  store÷pg-boss (per round)   aim`
  ]
  const cpu = []
  try {
    // Both store lifecycles and pg-boss's unit in the same alternating rounds (one plan: keys never repeat).
    const plan = lifecyclePlan()
    const opened = {
      project: lifecycleOver(store, plan, { markSent: true }),
      raw: () => boss.unit(),
      baselines: { "mark apart": lifecycleOver(store, plan), unprepared: lifecycleOver(unprepared, plan, { markSent: true }) }
    }
    for (const workers of [1, 8]) {
      const result = await measureCase(opened, { workers, ...settings })
      const [apart, unnamed] = result.baselines
      const row = (label, side, ratio, min, max) =>
        `    ${String(workers).padEnd(8)} ${label.padEnd(40)} ${number(side.rate).padStart(8)} ${number(result.raw.rate).padStart(9)}  ` +
        `${times(ratio)} (${times(min)}–${times(max)})`.padEnd(29) + ` ≥1.00× ${ratio >= 1 ? "met" : "MISSED"}`
      lines.push(
        row("claim (markSent) → finalize", result.project, result.ratio, result.minRatio, result.maxRatio),
        row("claim → markOperationSent → finalize", apart, apart.ratio, apart.minRatio, apart.maxRatio),
        row("claim (markSent) → finalize, unprepared", unnamed, unnamed.ratio, unnamed.minRatio, unnamed.maxRatio)
      )
      cpu.push(
        `${workers} runner${workers === 1 ? "" : "s"} ${number(result.project.cpuPerCycle)} µs (mark apart ${number(apart.cpuPerCycle)} µs, unprepared ${number(unnamed.cpuPerCycle)} µs) ` +
          `vs ${number(result.raw.cpuPerCycle)} µs`
      )
    }
  } finally {
    await store.close()
    await unprepared.close()
    await boss.close()
  }
  // Statements per unit at the wire, each side alone through a proxy (a fresh store and pg-boss on it).
  const via = throughProxy(url)
  const proxy = await startRoundTripProxy(via.target)
  try {
    const perUnit = async (open) => {
      const side = await open(via.at(proxy.port))
      try {
        for (let i = 0; i < 10; i++) await side.unit()
        const before = proxy.roundTrips()
        for (let i = 0; i < COUNTED_UNITS; i++) await side.unit()
        return (proxy.roundTrips() - before) / COUNTED_UNITS
      } finally {
        await side.close()
      }
    }
    const storeTrips = (markSent) =>
      perUnit(async (proxied) => {
        const counted = await openConnectorStore({
          url: proxied,
          tablePrefix: `fleet_vs_boss_counted_${markSent ? "sent_" : ""}`,
          maxConnections: POOL,
          readWinner: winnerOf
        })
        const cycle = lifecycleOver(counted, lifecyclePlan(), { markSent })
        return { unit: () => cycle(0), close: () => counted.close() }
      })
    const sentTrips = await storeTrips(true)
    const apartTrips = await storeTrips(false)
    const bossTrips = await perUnit((proxied) => openPgBoss(proxied, { schema: "fleet_boss", max: POOL }))
    lines.push(
      `    client CPU per unit, store vs pg-boss: ${cpu.join("; ")}`,
      `    round trips per unit (at the wire, ReadyForQuery per round trip, ${COUNTED_UNITS} units): store ${sentTrips.toFixed(2)} ` +
        `(claimOperation with markSent 1, finalizeOperationAndArmWatch 5; 2 commits), ${apartTrips.toFixed(2)} with the mark apart ` +
        `(markOperationSent 1 more; 3 commits), pg-boss ${bossTrips.toFixed(2)} (send 1, fetch 1, complete 1; one autocommitted statement each)`
    )
  } finally {
    await proxy.close()
  }
  return lines
}

const scaleCase = async (context) => {
  if (!HUGE) {
    return { skip: `opt-in: --huge (or BENCH_FLEET_HUGE=1) builds ${HUGE_ROWS.toLocaleString("en-US")} rows on Postgres and on SQLite` }
  }
  if (context.postgres.skip !== undefined) return { skip: context.postgres.skip }
  const lines = []
  const pgSmall = await pgAtScale(context.postgres.url, SMALL_ROWS)
  const pgLarge = await pgAtScale(context.postgres.url, HUGE_ROWS)
  lines.push(...scaleLines("postgres", pgSmall, pgLarge, SMALL_ROWS, HUGE_ROWS))
  const sqliteSmall = await sqliteAtScale(context.sqlite.path("scale-small.sqlite"), SMALL_ROWS)
  const sqliteLarge = await sqliteAtScale(context.sqlite.path("scale-large.sqlite"), HUGE_ROWS)
  lines.push(...scaleLines("sqlite", sqliteSmall, sqliteLarge, SMALL_ROWS, HUGE_ROWS))
  return lines
}

const ownersCase = async (context) => {
  const lines = []
  if (context.postgres.skip === undefined) {
    lines.push(...ownerBacklogLines("postgres", SMALL_ROWS, LIMIT, await pgOwnerBacklog(context.postgres.url, SMALL_ROWS, LIMIT)))
  }
  lines.push(...ownerBacklogLines("sqlite", SMALL_ROWS, LIMIT, await sqliteOwnerBacklog(context.sqlite.path, SMALL_ROWS, LIMIT)))
  return lines
}

const watchOwnersCase = async (context) => {
  const lines = []
  if (context.postgres.skip === undefined) {
    lines.push(...watchBacklogLines("postgres", SMALL_ROWS, LIMIT, await pgWatchBacklog(context.postgres.url, SMALL_ROWS, LIMIT)))
  }
  lines.push(...watchBacklogLines("sqlite", SMALL_ROWS, LIMIT, await sqliteWatchBacklog(context.sqlite.path, SMALL_ROWS, LIMIT)))
  return lines
}

/** The fleet bench (see bench/README.md for the shape). */
export default {
  title: "fleet: many runners and processes on one Postgres database, lifecycles/s",
  before: async () => ({ postgres: await scratchPostgres(), sqlite: scratchSqliteFolder() }),
  after: async (context) => {
    context.sqlite.remove()
    await context.postgres.drop?.()
  },
  cases: [
    { name: `postgres · drain ${OPS.toLocaleString("en-US")} due operations · 1 × 1, 1 × 8, 4 × 4`, run: drainCase },
    { name: "postgres · store lifecycle vs pg-boss send → fetch → complete", run: pgBossCase },
    { name: `one owner's backlog of ${SMALL_ROWS.toLocaleString("en-US")} due rows and ${OTHERS} other owners · postgres, sqlite`, run: ownersCase },
    {
      name: `one owner's backlog of ${SMALL_ROWS.toLocaleString("en-US")} due watches and ${OTHERS} other owners · postgres, sqlite`,
      run: watchOwnersCase
    },
    { name: `due page at ${HUGE_ROWS.toLocaleString("en-US")} rows vs ${SMALL_ROWS.toLocaleString("en-US")} · postgres, sqlite`, run: scaleCase }
  ]
}
