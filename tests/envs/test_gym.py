import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env

from darwin.actions import Click, Finished, OpenApp
from darwin.envs.base import InfraError
from darwin.envs.gym import GYM_ID, PhoneGymEnv
from darwin.envs.sim.env import SimPhoneEnv


def test_check_env_passes():
    check_env(PhoneGymEnv(), skip_render_check=True)
    check_env(gym.make(GYM_ID, tasks=["amazon_0", "clock_1"]).unwrapped, skip_render_check=True)


def test_sampled_actions_always_convert():
    env = PhoneGymEnv()
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(50):
        env.step(env.action_space.sample())


def test_reward_only_when_the_goal_holds():
    env = PhoneGymEnv(tasks=["settings_dark_theme"])
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(Finished())
    assert (reward, terminated) == (0.0, True)
    env.reset(seed=0)
    env.step(OpenApp(app="Settings"))
    phone = env.phone.phone
    x, y = phone.layout().find("settings.display").center
    env.step(Click(x=x, y=y))
    x, y = phone.layout().find("settings.dark_theme").center
    _, reward, terminated, truncated, info = env.step(Click(x=x, y=y))
    assert (reward, terminated, truncated, info["success"]) == (1.0, True, False, True)


def test_reset_without_seed_keeps_state_with_seed_resets():
    env = PhoneGymEnv(tasks=["settings_dark_theme"])
    env.reset(seed=1)
    phone = env.phone.phone
    phone.app_data("settings")["dark_theme"] = True
    env.reset()
    assert phone.app_data("settings")["dark_theme"]
    env.reset(seed=1)
    assert not phone.app_data("settings")["dark_theme"]


class FlakyPhone(SimPhoneEnv):
    def execute(self, action):
        raise InfraError("disconnect", "connection reset by peer")


def test_infrastructure_failure_is_a_truncation_with_cause_never_a_reward():
    env = PhoneGymEnv(env=FlakyPhone(seed=0), tasks=["amazon_0"])
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(OpenApp(app="Amazon"))
    assert (reward, terminated, truncated, info["truncation_cause"]) == (0.0, False, True, "disconnect")
    assert obs["screenshot"].dtype == np.uint8


def test_step_budget_truncates():
    env = PhoneGymEnv(tasks=["amazon_0"])
    env.reset(seed=0)
    for _ in range(env.task.step_budget):
        _, _, terminated, truncated, _ = env.step(Click(x=1, y=1000))
        assert not terminated
    assert truncated
