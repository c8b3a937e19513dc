#!/usr/bin/env python3
"""PPO on CartPole-v1 in PyTorch, in the structure of CleanRL's ppo.py and with its
hyperparameters: the anchor bench/rl_vs_pytorch.sh times beside hourglass's bench_ppo.

Gymnasium is not installed here, so CartPole-v1 is written below from Gymnasium's equations (the
same dynamics as hourglass's rl/env/classic_control_dynamics.h): 4 copies stepped together with
NumPy (faster than gym's SyncVectorEnv, which steps each copy in Python), reset in the same step
as CleanRL's gym 0.23 vector environments do, 500-step time limit.

Prints one line: seed, environment steps, training seconds (from the agent's construction),
steps/s, and the mean and deviation of the return over 100 greedy evaluation episodes.
"""
import argparse
import math
import time

import numpy as np
import torch
import torch.nn as nn
from torch.distributions.categorical import Categorical


class CartPoleVec:
    """N copies of CartPole-v1 (Gymnasium's Euler dynamics), reset in the same step."""

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    max_steps = 500

    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.default_rng(seed)
        self.total_mass = self.masspole + self.masscart
        self.polemass_length = self.masspole * self.length
        self.state = self.rng.uniform(-0.05, 0.05, size=(n, 4))
        self.steps = np.zeros(n, dtype=np.int64)
        self.returns = np.zeros(n)

    def obs(self):
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, self.force_mag, -self.force_mag)
        costheta, sintheta = np.cos(theta), np.sin(theta)
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = np.stack([x, x_dot, theta, theta_dot], axis=1)
        terminated = ((x < -self.x_threshold) | (x > self.x_threshold) |
                      (theta < -self.theta_threshold) | (theta > self.theta_threshold))
        self.steps += 1
        truncated = self.steps >= self.max_steps
        reward = np.ones(self.n, dtype=np.float32)
        self.returns += reward
        done = terminated | truncated
        finished = self.returns[done].copy()
        if done.any():
            self.state[done] = self.rng.uniform(-0.05, 0.05, size=(int(done.sum()), 4))
            self.steps[done] = 0
            self.returns[done] = 0
        return self.obs(), reward, terminated, truncated, finished


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_size, actions):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_size, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_size, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, actions), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-steps", type=int, default=500000)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    num_envs, num_steps, lr, gamma, lam = 4, 128, 2.5e-4, 0.99, 0.95
    num_minibatches, update_epochs, clip_coef, ent_coef, vf_coef, max_grad_norm = 4, 4, 0.2, 0.01, 0.5, 0.5
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    num_iterations = a.total_steps // batch_size

    start = time.perf_counter()
    np.random.seed(a.seed)
    torch.manual_seed(a.seed)
    envs = CartPoleVec(num_envs, a.seed)
    agent = Agent(4, 2)
    optimizer = torch.optim.Adam(agent.parameters(), lr=lr, eps=1e-5)
    obs = torch.zeros((num_steps, num_envs, 4))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))
    global_step = 0
    next_obs = torch.tensor(envs.obs())
    next_done = torch.zeros(num_envs)
    for iteration in range(1, num_iterations + 1):
        optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * lr
        for step in range(num_steps):
            global_step += num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            o, reward, term, trunc, _ = envs.step(action.numpy())
            rewards[step] = torch.tensor(reward)
            next_obs = torch.tensor(o)
            next_done = torch.tensor((term | trunc).astype(np.float32))
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(num_steps)):
                if t == num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
            returns = advantages + values
        b_obs, b_logprobs, b_actions = obs.reshape(-1, 4), logprobs.reshape(-1), actions.reshape(-1)
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        b_inds = np.arange(batch_size)
        for _ in range(update_epochs):
            np.random.shuffle(b_inds)
            for s in range(0, batch_size, minibatch_size):
                mb = b_inds[s:s + minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                    b_obs[mb], b_actions.long()[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_adv = b_advantages[mb]
                mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio,
                                    -mb_adv * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)).mean()
                newvalue = newvalue.view(-1)
                v_unclipped = (newvalue - b_returns[mb]) ** 2
                v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -clip_coef, clip_coef)
                v_loss = 0.5 * torch.max(v_unclipped, (v_clipped - b_returns[mb]) ** 2).mean()
                loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                optimizer.step()
    seconds = time.perf_counter() - start

    # 100 greedy episodes from other resets.
    ev = CartPoleVec(16, 1000 + a.seed)
    per = [[] for _ in range(16)]
    o = ev.obs()
    while min(len(x) for x in per) < 7:
        with torch.no_grad():
            act = agent.actor(torch.tensor(o)).argmax(dim=1).numpy()
        o, _, term, trunc, finished = ev.step(act)
        for i, d in enumerate(np.nonzero(term | trunc)[0]):
            per[d].append(finished[i])
    got = [per[i][r] for r in range(7) for i in range(16)][:100]
    print(f"| pytorch {torch.__version__} | {a.seed} | {global_step} | {seconds:.2f} | "
          f"{global_step / seconds:.0f} | {np.mean(got):.1f} +- {np.std(got):.1f} |")


if __name__ == "__main__":
    main()
