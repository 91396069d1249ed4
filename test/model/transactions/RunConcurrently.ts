import { Effect } from "effect"
import fc from "fast-check"
import { expect } from "vitest"
import { type Plan, planArb, planLabel } from "./plan.js"
import { stepsRun, transactionOf, txContext } from "./RunTransaction.js"
import { endedOf, type TxReal, watchesOutside } from "./TxReal.js"
import { applyStep, copyOf, pictureOf, type TxModel } from "./TxModel.js"

interface Seen {
  readonly transaction: number
  readonly result: string
}

/**
 * Several transactions at once, each yielding to the others after every
 * step, while an observer reads the watch table outside any transaction.
 *
 * The model: transactions never interleave, so each one's steps form one
 * unbroken stretch of the shared log; replayed one after the other in the
 * order they ran, on the plain tables, every step sees exactly what it saw,
 * and the tables end as the committed ones left them. The observer only
 * ever sees states that some prefix of the commits produced, in order.
 */
export class RunConcurrently implements fc.AsyncCommand<TxModel, TxReal> {
  constructor(readonly plans: ReadonlyArray<Plan>, readonly observations: number) {}

  static readonly arbitrary = fc.tuple(fc.array(planArb, { minLength: 2, maxLength: 4 }), fc.integer({ min: 1, max: 12 }))
    .map(([plans, observations]) => new RunConcurrently(plans, observations))

  check(): boolean {
    return true
  }

  async run(m: TxModel, r: TxReal): Promise<void> {
    m.history.push(String(this))
    const log: Array<Seen> = []
    const observed: Array<unknown> = []
    const observer = Effect.repeatN(
      Effect.zipRight(Effect.tap(watchesOutside, (picture) => Effect.sync(() => observed.push(picture))), Effect.yieldNow()),
      this.observations - 1
    )
    const transactions = this.plans.map((plan, transaction) =>
      Effect.exit(transactionOf(plan, (result) => log.push({ transaction, result }), true))
    )
    const exits = await r.run(Effect.all([Effect.all(transactions, { concurrency: "unbounded" }), observer], {
      concurrency: "unbounded"
    }))
    if (exits._tag === "Failure") throw new Error(txContext(m, "the concurrent run itself failed"))
    const [ends] = exits.value

    const order: Array<number> = []
    for (const [index, seen] of log.entries()) {
      if (!order.includes(seen.transaction)) order.push(seen.transaction)
      else expect(log[index - 1]?.transaction, txContext(m, `transaction ${seen.transaction} interleaved with another`))
        .toBe(seen.transaction)
    }

    const committed = [pictureOf(m.tables).watches]
    for (const transaction of order) {
      const plan = this.plans[transaction]!
      const draft = copyOf(m.tables)
      const expected = plan.steps.slice(0, stepsRun(plan)).map((step) => applyStep(draft, step))
      const seen = log.filter((entry) => entry.transaction === transaction).map((entry) => entry.result)
      expect(seen, txContext(m, `transaction ${transaction}'s steps saw other results than a serial replay`)).toEqual(expected)
      if (plan.ending.kind === "commit") {
        m.tables = draft
        committed.push(pictureOf(m.tables).watches)
      }
    }
    for (const [transaction, plan] of this.plans.entries()) {
      expect(endedOf(ends[transaction]!), txContext(m, `transaction ${transaction} ended otherwise than planned`))
        .toBe(plan.ending.kind)
    }

    let reached = 0
    for (const picture of observed) {
      const at = committed.findIndex((state, index) => index >= reached && JSON.stringify(state) === JSON.stringify(picture))
      expect(at, txContext(m, `an outside read saw a state no commit sequence produced: ${JSON.stringify(picture)}`))
        .toBeGreaterThanOrEqual(0)
      reached = at
    }
    expect(await r.picture(), txContext(m, "the committed tables differ from the serial replay's")).toEqual(pictureOf(m.tables))
  }

  toString(): string {
    return `concurrently ${this.plans.map((plan, i) => `#${i} ${planLabel(plan)}`).join(" | ")} (${this.observations} outside reads)`
  }
}
