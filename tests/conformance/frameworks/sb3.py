"""stable-baselines3 PPO on CartPole-v1 (gymnasium's own, nothing downloaded) with `verbose=1`: the logger's box
of `| name | value |` rows after every rollout (argv: SCENARIO). nan_crash: the reward turns NaN at a set step, as
a broken reward function makes it; the value loss, then the policy, go NaN."""

from __future__ import annotations

import sys
import time

import gymnasium as gym
import numpy as np
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from tiny import PACE_S

ROLLOUT = 64
ROLLOUTS = 30
NAN_AT = 10 * ROLLOUT  # the env step from which every reward is NaN


class BrokenReward(gym.Wrapper):
    def __init__(self, env: gym.Env, nan_at: int | None) -> None:
        super().__init__(env)
        self.nan_at, self.steps = nan_at, 0

    def step(self, action):  # type: ignore[no-untyped-def]
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.steps += 1
        if self.nan_at is not None and self.steps >= self.nan_at:
            reward = float("nan")
        return obs, reward, terminated, truncated, info


class Pace(BaseCallback):
    """PACE_S per rollout of ROLLOUT steps: the compute of a real environment and model."""

    def _on_step(self) -> bool:
        if self.num_timesteps % ROLLOUT == 0:
            time.sleep(PACE_S * 4)
        return True


def main() -> None:
    scenario = sys.argv[1]
    env = BrokenReward(gym.make("CartPole-v1"), NAN_AT if scenario == "nan_crash" else None)
    np.seterr(all="ignore")
    model = PPO("MlpPolicy", env, n_steps=ROLLOUT, batch_size=32, n_epochs=2, verbose=1, seed=0, device="cpu")
    model.learn(total_timesteps=ROLLOUT * ROLLOUTS, callback=Pace())


if __name__ == "__main__":
    main()
