// pg-boss's unit of work, for the fleet bench's comparison: `send` a job,
// `fetch` one, `complete` it, each pg-boss's direct call (no `work()`
// polling loop). Its maintenance (`supervise`) and cron (`schedule`) are
// off, so every statement it sends is a unit's. Its tables live in a
// schema of their own on the bench's database.
//
// Each call is one statement on pg-boss's pool (`pool.query`, autocommitted):
// `send` one INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING id, `fetch`
// one CTE that locks the next job (FOR UPDATE SKIP LOCKED) and marks it
// active, `complete` one UPDATE … RETURNING counted in a CTE; so 3 round
// trips and 3 commits per unit (the bench also counts them at the wire).
import PgBoss from "pg-boss"

const QUEUE = "write-backs"

/** A started pg-boss on `url` (schema `schema`, a pool of `max`) with its queue; `unit()` runs one unit. */
export const openPgBoss = async (url, { schema, max }) => {
  const boss = new PgBoss({ connectionString: url, schema, max, supervise: false, schedule: false, migrate: true })
  const errors = []
  boss.on("error", (error) => errors.push(error))
  await boss.start()
  await boss.createQueue(QUEUE)
  let serial = 0
  let emptyFetches = 0
  return {
    /** send → fetch → complete. A fetch may find the job another runner just sent locked by that runner's fetch: it fetches again. */
    unit: async () => {
      const id = await boss.send(QUEUE, { edit: ++serial, payloadHash: `hash-${serial}` })
      if (id === null) throw new Error("pg-boss send answered no id")
      let jobs = await boss.fetch(QUEUE)
      while (jobs.length === 0) {
        emptyFetches++
        jobs = await boss.fetch(QUEUE)
      }
      const done = await boss.complete(QUEUE, jobs[0].id)
      if (done.affected !== 1) throw new Error(`pg-boss complete affected ${done.affected} jobs`)
    },
    emptyFetches: () => emptyFetches,
    close: async () => {
      await boss.stop({ graceful: false, wait: true, timeout: 1_000 })
      if (errors.length > 0) throw errors[0]
    }
  }
}
