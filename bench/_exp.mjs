import pg from "pg"
import { scratchPostgres } from "./support/databases.mjs"
import { runDrain, drainedCleanly } from "./support/fleet-drain.mjs"
const db = await scratchPostgres()
const dbname = new URL(db.url).pathname.slice(1)
try {
  for (const [p, r, side, ops] of JSON.parse(process.env.CONFIGS)) {
    const mon = new pg.Client(db.url); await mon.connect()
    const waits = new Map(); let samples = 0, stop = false
    const loop = (async () => { while (!stop) { const { rows } = await mon.query(`SELECT coalesce(wait_event_type,'CPU') || ':' || coalesce(wait_event,'-') AS w, state, left(query, 40) AS q FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid() AND state <> 'idle'`, [dbname]); samples++; for (const x of rows) { const k = `${x.w} | ${x.q.replace(/\s+/g,' ')}`; waits.set(k, (waits.get(k) ?? 0) + 1) }; await new Promise(r => setTimeout(r, 20)) } })()
    const x = await runDrain(db.url, { processes: p, runners: r, side, way: process.env.WAY ?? "batches", limit: Number(process.env.LIMIT ?? 20), ops, warm: Number(process.env.WARM ?? 100) })
    stop = true; await loop; await mon.end()
    const cpu = x.cpuMicros.reduce((a, b) => a + b, 0) / x.committed
    console.log(`${p}x${r} ${side} ops ${ops}: ${x.rate.toFixed(0)}/s client cpu ${cpu.toFixed(0)}us timed ${x.seconds.toFixed(1)}s clean ${drainedCleanly(x)}`)
    console.log("  active backends per sample:", [...waits.values()].reduce((a,b)=>a+b,0) / samples)
    for (const [k, n] of [...waits].sort((a,b)=>b[1]-a[1]).slice(0, 12)) console.log("   ", (n / samples).toFixed(2), k)
  }
} finally { await db.drop() }
