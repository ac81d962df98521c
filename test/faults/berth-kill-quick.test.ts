/**
 * The fast subset of the fault tier, for make test: berth SIGKILLed 6 times during pod
 * creation, volume setup, image pulls and deletion, then the same convergence and leak
 * checks as the full run (berth-kill.ts). About 90 s.
 */
import { berthKillScenario } from './berth-kill.ts';

berthKillScenario(6, 'berth-kill-quick');
