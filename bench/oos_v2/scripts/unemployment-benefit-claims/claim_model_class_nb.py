# idiom: a small ClaimModel class (fit/predict/__repr__) that one-hot encodes with get_dummies, reindexes to the columns seen in fit and wraps GaussianNB with equal class priors; intended: valid
import pandas as pd
from sklearn.naive_bayes import GaussianNB


class ClaimModel:
    def __init__(self, target="ui", priors=(0.5, 0.5)):
        self.target = target
        self.nb = GaussianNB(priors=list(priors))
        self.columns = None

    def _frame(self, df):
        X = df.drop(columns=["id", self.target], errors="ignore")
        strings = X.select_dtypes(exclude="number").columns.tolist()
        X = pd.get_dummies(X, columns=strings, dtype=float)
        if self.columns is None:
            self.columns = X.columns
        return X.reindex(columns=self.columns, fill_value=0.0)

    def fit(self, df):
        self.nb.fit(self._frame(df), df[self.target])
        return self

    def predict(self, df):
        return self.nb.predict(self._frame(df))

    def __repr__(self):
        return f"ClaimModel(classes={list(self.nb.classes_)}, n_features={len(self.columns)})"


if __name__ == "__main__":
    train = pd.read_csv("data/train.csv")
    test = pd.read_csv("data/test.csv")
    model = ClaimModel().fit(train)
    print(model)
    pd.DataFrame({"id": test["id"], "ui": model.predict(test)}).to_csv("submission.csv", index=False)
