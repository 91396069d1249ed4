import { type Effect, Option } from "effect"
import type { ConnectorStore } from "../service/ConnectorStore.js"

/** What a Promise method resolves with for its Effect method's answer `A`: an `Option` as its value or `null`. */
export type PromiseAnswer<A> = A extends Option.Option<infer V> ? V | null : A

/** An answer as the Promise API gives it: an `Option` as its value or `null`, anything else as it is. */
export const promiseAnswer = <A>(answer: A): PromiseAnswer<A> =>
  (Option.isOption(answer) ? Option.getOrNull(answer) : answer) as PromiseAnswer<A>

/** Runs one call of the Effect API as a Promise of its answer (see `promiseAnswer`), rejecting with the tagged error. */
export type PromiseCall = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) => Promise<PromiseAnswer<A>>
