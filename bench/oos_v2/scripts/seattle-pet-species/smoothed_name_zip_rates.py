# idiom: pure-pandas smoothed rates (m-estimate) of 'Dog' per lower-cased name and per 5-digit zip code, combined naive-Bayes style by adding their log-odds to the prior's; intended: valid
import numpy as np
import pandas as pd

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

for df in (train, test):
    df["name_key"] = df["animal_name"].fillna("<none>").str.strip().str.lower()
    df["zip5"] = df["zip_code"].astype("str").str[:5].fillna("00000")

train["is_dog"] = (train["species"] == "Dog").astype(float)
prior = train["is_dog"].mean()


def logit(p):
    return np.log(p / (1 - p))


def smoothed_rate(key, m):
    g = train.groupby(key)["is_dog"].agg(["sum", "count"])
    return (g["sum"] + m * prior) / (g["count"] + m)


name_rate = test["name_key"].map(smoothed_rate("name_key", m=10)).fillna(prior)
zip_rate = test["zip5"].map(smoothed_rate("zip5", m=50)).fillna(prior)
score = logit(prior) + (logit(name_rate) - logit(prior)) + (logit(zip_rate) - logit(prior))
p_dog = 1 / (1 + np.exp(-score))

print("share of test names seen in train:", test["name_key"].isin(train["name_key"]).mean().round(3))
pd.DataFrame({"id": test["id"], "species": p_dog.clip(0.01, 0.99)}).to_csv("submission.csv", index=False)
