# idiom: argparse options with defaults and a main() guard, logging instead of print, KNeighborsClassifier on min-max scaled columns with missing creatinine filled with 0; intended: valid
import argparse
import logging

import pandas as pd
from sklearn.neighbors import KNeighborsClassifier
from sklearn.preprocessing import MinMaxScaler

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
log = logging.getLogger("flc-knn")


def parse_args():
    parser = argparse.ArgumentParser(description="k-nearest-neighbour baseline for FLC mortality")
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--neighbors", type=int, default=15)
    parser.add_argument("--out", default="submission.csv")
    return parser.parse_args()


def load(data_dir):
    train = pd.read_csv(f"{data_dir}/train.csv")
    test = pd.read_csv(f"{data_dir}/test.csv")
    log.info("train %s, test %s", train.shape, test.shape)
    return train, test


def prepare(df):
    out = df.drop(columns=["id", "death"], errors="ignore").copy()
    out["sex"] = (out["sex"] == "M").astype(int)
    out["creatinine"] = out["creatinine"].fillna(0)
    return out


def main():
    args = parse_args()
    train, test = load(args.data_dir)
    X, X_test = prepare(train), prepare(test)
    scaler = MinMaxScaler().fit(X)
    knn = KNeighborsClassifier(n_neighbors=args.neighbors)
    knn.fit(scaler.transform(X), train["death"])
    proba = knn.predict_proba(scaler.transform(X_test))[:, 1]
    log.info("mean predicted risk %.3f", proba.mean())
    pd.DataFrame({"id": test["id"], "death": proba}).to_csv(args.out, index=False)
    log.info("wrote %s", args.out)


if __name__ == "__main__":
    main()
