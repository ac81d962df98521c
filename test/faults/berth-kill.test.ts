/**
 * berth SIGKILLed mid-operation (issue #32, item 4), full size: 30 kills, about 3
 * minutes here (FAULTS_ITERATIONS, FAULTS_SEED). The scenario is in berth-kill.ts.
 */
import { berthKillScenario } from './berth-kill.ts';

berthKillScenario(30, 'berth-kill');
