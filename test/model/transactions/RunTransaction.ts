import { Transactor } from "@connector-store/core"
import { Effect } from "effect"
import type fc from "fast-check"
import { expect } from "vitest"
import { abandon, type Plan, planArb, planLabel, runStep } from "./plan.js"
import { endedOf, type TxReal } from "./TxReal.js"
import { applyStep, copyOf, pictureOf, type TxModel } from "./TxModel.js"

/** The transaction `plan` as one effect; `saw` hears each step's result as it happens. */
export const transactionOf = (plan: Plan, saw: (result: string) => void, pause: boolean) =>
  Effect.flatMap(Transactor, ({ withTransaction }) =>
    withTransaction(Effect.gen(function*() {
      for (const [index, step] of plan.steps.entries()) {
        if (plan.ending.kind !== "commit" && plan.ending.after === index) return yield* abandon(plan.ending)
        saw(yield* runStep(step))
        if (pause) yield* Effect.yieldNow()
      }
      if (plan.ending.kind !== "commit") return yield* abandon(plan.ending)
    })))

/** How many steps of `plan` run before it commits or is abandoned. */
export const stepsRun = (plan: Plan): number =>
  plan.ending.kind === "commit" ? plan.steps.length : Math.min(plan.ending.after, plan.steps.length)

/** Failure context: the commands run so far. */
export const txContext = (m: TxModel, what: string): string =>
  `${what}\ncommands run so far:\n${m.history.map((line, i) => `  ${i + 1}. ${line}`).join("\n")}`

/**
 * One transaction on its own. The model: its steps see what the plain
 * tables say, one after the other, including its own earlier writes; if it
 * commits, the tables are what its steps made them; if it fails, dies or is
 * interrupted at any point, the tables are exactly as before.
 */
export class RunTransaction implements fc.AsyncCommand<TxModel, TxReal> {
  constructor(readonly plan: Plan) {}

  static readonly arbitrary = planArb.map((plan) => new RunTransaction(plan))

  check(): boolean {
    return true
  }

  async run(m: TxModel, r: TxReal): Promise<void> {
    m.history.push(String(this))
    const seen: Array<string> = []
    const exit = await r.run(transactionOf(this.plan, (result) => seen.push(result), false))

    const draft = copyOf(m.tables)
    const expected = this.plan.steps.slice(0, stepsRun(this.plan)).map((step) => applyStep(draft, step))
    expect(seen, txContext(m, "the steps saw other results than the model's")).toEqual(expected)
    expect(endedOf(exit), txContext(m, "the transaction ended otherwise than planned")).toBe(this.plan.ending.kind)
    if (this.plan.ending.kind === "commit") m.tables = draft
    expect(await r.picture(), txContext(m, "the committed tables differ from the model's")).toEqual(pictureOf(m.tables))
  }

  toString(): string {
    return `transaction ${planLabel(this.plan)}`
  }
}
