import { Context, Effect, ManagedRuntime, Layer } from "effect"
const Tag = Context.GenericTag("x")
const rt = ManagedRuntime.make(Layer.succeed(Tag, { a: () => Effect.succeed(true) }))
const wrap = (e) => Effect.uninterruptibleMask((restore) => Effect.withFiberRuntime((f) => Effect.matchCauseEffect(e, { onFailure: Effect.failCause, onSuccess: Effect.succeed })))
const cyc = Effect.gen(function*() { const s = yield* Tag; const a = yield* wrap(s.a()); const b = yield* wrap(s.a()); const c = yield* wrap(s.a()); return a && b && c })
for (let i = 0; i < 20000; i++) await rt.runPromise(cyc)
const N = 100000; const t0 = performance.now(); const c0 = process.cpuUsage()
for (let i = 0; i < N; i++) await rt.runPromise(cyc)
const t = performance.now() - t0
console.log("µs per empty Effect cycle", (t / N * 1000).toFixed(1), "cpu", (process.cpuUsage(c0).user / N).toFixed(1))
let x = 0; const t1 = performance.now()
for (let i = 0; i < N; i++) { x += await (async () => 1)() }
console.log("µs per async fn await", ((performance.now() - t1) / N * 1000).toFixed(2))
