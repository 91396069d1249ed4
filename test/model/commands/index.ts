import fc from "fast-check"
import type { RealStore } from "../RealStore.js"
import { commandsConstraints } from "../runs.js"
import type { WatchModel } from "../WatchModel.js"
import { AdvanceClock } from "./AdvanceClock.js"
import { ArmWatch } from "./ArmWatch.js"
import { ClaimAttempt } from "./ClaimAttempt.js"
import { CollectFinishedOperations } from "./CollectFinishedOperations.js"
import { DeferWatch } from "./DeferWatch.js"
import { ListDueOperations } from "./ListDueOperations.js"
import { MoveWinner } from "./MoveWinner.js"
import { ReadByDocuments } from "./ReadByDocuments.js"
import { RecordVerification } from "./RecordVerification.js"
import { ResumeAuthDeferred } from "./ResumeAuthDeferred.js"
import { ResumeOfflineDeferred } from "./ResumeOfflineDeferred.js"
import { SeedOperations } from "./SeedOperations.js"
import { SeedWatch } from "./SeedWatch.js"

/**
 * Random command sequences over the universe. The weights favour the watch
 * cycle (seed, arm, claim, verify) so runs reach deep states; the sweep,
 * resumes and retention come often enough to see them.
 */
export const watchCommands = (maxCommands: number): fc.Arbitrary<Iterable<fc.AsyncCommand<WatchModel, RealStore>>> =>
  fc.commands<WatchModel, RealStore, false>([
    fc.oneof(
      { arbitrary: SeedWatch.arbitrary, weight: 4 },
      { arbitrary: ArmWatch.arbitrary, weight: 5 },
      { arbitrary: ClaimAttempt.arbitrary, weight: 5 },
      { arbitrary: DeferWatch.arbitrary, weight: 3 },
      { arbitrary: RecordVerification.arbitrary, weight: 5 },
      { arbitrary: MoveWinner.arbitrary, weight: 3 },
      { arbitrary: AdvanceClock.arbitrary, weight: 3 },
      { arbitrary: ResumeOfflineDeferred.arbitrary, weight: 1 },
      { arbitrary: ResumeAuthDeferred.arbitrary, weight: 1 },
      { arbitrary: ListDueOperations.arbitrary, weight: 3 },
      { arbitrary: ReadByDocuments.arbitrary, weight: 1 },
      { arbitrary: SeedOperations.arbitrary, weight: 3 },
      { arbitrary: CollectFinishedOperations.arbitrary, weight: 2 }
    )
  ], commandsConstraints(maxCommands))
