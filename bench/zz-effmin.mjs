import pg from "pg"
import { Effect } from "effect"
import { statements, numbered, identityParams, decisions } from "./support/raw-watch-steps.mjs"
export const effMinSteps = (url, table, winners, max) => {
  const pool = new pg.Pool({ connectionString: url, max }); pool.on("error", () => undefined)
  const texts = Object.fromEntries(Object.entries(statements(table)).map(([n, t]) => [n, numbered(t)]))
  const lockRead = `${texts.select} FOR UPDATE`; const decide = decisions(winners)
  const q = (client, text, params) => Effect.async((resume) => { client.query(text, params, (err, res) => resume(err ? Effect.die(err) : Effect.succeed(res))) })
  const connect = Effect.async((resume) => pool.connect((err, client, release) => resume(err ? Effect.die(err) : Effect.succeed([client, release]))))
  const step = (name) => (identity, input) => Effect.runPromise(Effect.withScheduler(Effect.acquireUseRelease(connect, ([client]) => Effect.gen(function*() {
    yield* q(client, "BEGIN")
    const { rows } = yield* q(client, lockRead, identityParams(identity))
    const { outcome, write } = decide[name](rows[0], identity, input)
    if (write !== undefined) yield* q(client, texts[write[0]], write[1])
    yield* q(client, "COMMIT")
    return outcome
  }), ([, release]) => Effect.sync(() => release())), globalThis.__counting))
  const arm = step("armWatch")
  return { claimWatchAttempt: step("claimWatchAttempt"), recordVerification: step("recordVerification"), armWatch: (i, r, o) => arm(i, o), close: () => pool.end() }
}
