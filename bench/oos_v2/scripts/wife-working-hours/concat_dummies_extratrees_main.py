# idiom: train and test concatenated for one pd.get_dummies pass and split back by length, ExtraTreesRegressor, logging and helper functions under a main() guard; intended: valid
import logging

import numpy as np
import pandas as pd
from sklearn.ensemble import ExtraTreesRegressor
from sklearn.metrics import mean_absolute_error
from sklearn.model_selection import cross_val_predict

logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(message)s")
logger = logging.getLogger(__name__)
TARGET = "hours"


def load():
    train = pd.read_csv("data/train.csv")
    test = pd.read_csv("data/test.csv")
    logger.info("loaded %d train and %d test rows", len(train), len(test))
    return train, test


def encode(train, test):
    full = pd.concat([train.drop(columns=[TARGET]), test], ignore_index=True)
    full = pd.get_dummies(full, columns=["occupation"], prefix="occ", dtype=int)
    full["kids"] = full[["child5", "child13", "child17"]].sum(axis=1)
    return full.iloc[: len(train)].reset_index(drop=True), full.iloc[len(train):].reset_index(drop=True)


def main():
    train, test = load()
    X_full, X_test = encode(train, test)
    features = [c for c in X_full.columns if c != "id"]
    model = ExtraTreesRegressor(n_estimators=200, min_samples_leaf=8, max_features=0.7, random_state=0)
    oof = cross_val_predict(model, X_full[features], train[TARGET], cv=5)
    logger.info("CV MAE %.1f", mean_absolute_error(train[TARGET], oof))
    model.fit(X_full[features], train[TARGET])
    pred = np.clip(model.predict(X_test[features]), 0, None)
    pd.DataFrame({"id": X_test["id"], TARGET: pred}).to_csv("submission.csv", index=False)
    logger.info("submission written")


if __name__ == "__main__":
    main()
